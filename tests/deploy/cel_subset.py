"""A CEL evaluator for the part of CEL the chart's ValidatingAdmissionPolicies use, written from
the CEL language definition (github.com/google/cel-spec, langdef.md), for the admission policy
tests: no CEL library is packaged for Debian bookworm and no real API server runs here.

In: literals (int, string, bool, null), lists, identifiers, field selection and indexing on
maps, has(), the operators ! && || == != in ?:, size(), and the macros all, exists, filter on
lists and maps (a map iterates over its keys). Anything else is a CelSyntaxError, so a policy
that strays outside the subset fails its test instead of being judged by guesswork.

Semantics kept from the definition: values of different types are unequal (1 == true is
false; no bool/int mix-up as in Python); a missing map key is an error, has() tests presence;
&& and || absorb errors commutatively (false && error is false, error || true is true);
all/exists absorb errors the same way over their elements; ?: evaluates only the branch taken;
every other operator is strict (an error operand gives an error); a non-bool where a bool is
needed is an error ("no matching overload").
"""
import re

__all__ = ["CelError", "CelSyntaxError", "compile_expression", "evaluate"]


class CelError(Exception):
    """An evaluation error (a value of CEL's error type)."""


class CelSyntaxError(Exception):
    """Not in the subset (or not CEL)."""


_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<int>\d+)(?![\w.])
  | (?P<str>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<op>==|!=|&&|\|\||<=|>=|[!?:.,\[\]()<>])
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
""", re.X)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
_RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
             "loop", "package", "namespace", "return", "var", "void", "while"}
MACROS = {"all", "exists", "filter"}


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise CelSyntaxError(f"unexpected {text[pos:pos + 10]!r} at {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        value = m.group()
        if kind == "str":
            body = value[1:-1]
            if "\\" in body:
                def esc(e):
                    if e.group(1) not in _ESCAPES:
                        raise CelSyntaxError(f"escape \\{e.group(1)} is outside the subset")
                    return _ESCAPES[e.group(1)]
                body = re.sub(r"\\(.)", esc, body)
            value = body
        elif kind == "int":
            value = int(value)
            if value > 2**63 - 1:
                raise CelSyntaxError("int literal out of range")
        elif kind == "id" and value in _RESERVED:
            raise CelSyntaxError(f"reserved word {value}")
        out.append((kind, value, m.start()))
    out.append(("end", None, len(text)))
    return out


class _Parser:
    """Recursive descent over CEL's grammar (langdef.md "Syntax"), building tuples."""

    def __init__(self, text):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, value=None):
        kind, v, _ = self.toks[self.i]
        return v == value and kind in ("op", "id") if value is not None else (kind, v)

    def take(self, value=None):
        kind, v, pos = self.toks[self.i]
        if value is not None and not (v == value and kind in ("op", "id")):
            raise CelSyntaxError(f"expected {value!r} at {pos}, found {v!r}")
        self.i += 1
        return kind, v

    def parse(self):
        e = self.expr()
        if self.peek() != ("end", None):
            raise CelSyntaxError(f"trailing input at {self.toks[self.i][2]}")
        return e

    def expr(self):
        cond = self.binary_chain("||", self.conjunction)
        if self.peek("?"):
            self.take("?")
            then = self.binary_chain("||", self.conjunction)
            self.take(":")
            return ("?:", cond, then, self.expr())
        return cond

    def binary_chain(self, op, sub):
        left = sub()
        while self.peek(op):
            self.take(op)
            left = (op, left, sub())
        return left

    def conjunction(self):
        return self.binary_chain("&&", self.relation)

    def relation(self):
        left = self.unary()
        while self.peek("==") or self.peek("!=") or self.peek("in"):
            op = self.take()[1]
            left = (op, left, self.unary())
        if any(self.peek(o) for o in ("<", "<=", ">", ">=", "+", "-", "*", "/", "%")):
            raise CelSyntaxError(f"operator {self.toks[self.i][1]} is outside the subset")
        return left

    def unary(self):
        if self.peek("!"):
            self.take("!")
            return ("!", self.unary())
        return self.member()

    def member(self):
        e = self.primary()
        while True:
            if self.peek("."):
                self.take(".")
                kind, name = self.take()
                if kind != "id":
                    raise CelSyntaxError(f"field name expected, found {name!r}")
                if self.peek("("):
                    e = self.call(name, e)
                else:
                    e = ("select", e, name)
            elif self.peek("["):
                self.take("[")
                index = self.expr()
                self.take("]")
                e = ("index", e, index)
            else:
                return e

    def args(self):
        self.take("(")
        out = []
        while not self.peek(")"):
            out.append(self.expr())
            if not self.peek(")"):
                self.take(",")
        self.take(")")
        return out

    def call(self, name, target):
        args = self.args()
        if name in MACROS:
            if len(args) != 2 or args[0][0] != "ident":
                raise CelSyntaxError(f"{name}() takes an iteration variable and an expression")
            return ("macro", name, target, args[0][1], args[1])
        if name == "size" and not args:
            return ("size", target)
        raise CelSyntaxError(f"function {name}() is outside the subset")

    def primary(self):
        kind, v = self.take()
        if kind in ("int", "str"):
            return ("lit", v)
        if kind == "id":
            if v in ("true", "false"):
                return ("lit", v == "true")
            if v == "null":
                return ("lit", None)
            if v == "has" and self.peek("("):
                args = self.args()
                if len(args) != 1 or args[0][0] != "select":
                    raise CelSyntaxError("has() takes a field selection")
                return ("has", args[0][1], args[0][2])
            if v == "size" and self.peek("("):
                args = self.args()
                if len(args) != 1:
                    raise CelSyntaxError("size() takes one argument")
                return ("size", args[0])
            if self.peek("("):
                raise CelSyntaxError(f"function {v}() is outside the subset")
            return ("ident", v)
        if v == "(":
            e = self.expr()
            self.take(")")
            return e
        if v == "[":
            items = []
            while not self.peek("]"):
                items.append(self.expr())
                if not self.peek("]"):
                    self.take(",")
            self.take("]")
            return ("list", items)
        raise CelSyntaxError(f"unexpected {v!r}")


def compile_expression(text):
    return _Parser(text).parse()


def _type(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "map"
    raise CelError(f"no CEL type for {type(v).__name__}")


def equal(a, b):
    """CEL ==: values of different types are unequal; lists and maps compare element-wise."""
    ta, tb = _type(a), _type(b)
    if ta != tb:
        return False
    if ta == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if ta == "map":
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return a == b


def _bool(v, what):
    if not isinstance(v, bool):
        raise CelError(f"no matching overload: {what} on {_type(v)}")
    return v


def _try(fn):
    try:
        return fn(), None
    except CelError as e:
        return None, e


class _Env:
    def __init__(self, activation, variables):
        self.activation = activation
        self.variables = variables  # name -> compiled expression, evaluated lazily once
        self.cache = {}

    def variable(self, name):
        if name not in self.variables:
            raise CelError(f"undeclared reference: variables.{name}")
        if name not in self.cache:
            self.cache[name] = _try(lambda: _eval(self.variables[name], self, {}))
        value, err = self.cache[name]
        if err is not None:
            raise err
        return value


def _eval(n, env, scope):
    op = n[0]
    if op == "lit":
        return n[1]
    if op == "ident":
        if n[1] in scope:
            return scope[n[1]]
        if n[1] == "variables":
            return env
        if n[1] not in env.activation:
            raise CelError(f"undeclared reference: {n[1]}")
        return env.activation[n[1]]
    if op == "list":
        return [_eval(x, env, scope) for x in n[1]]
    if op == "select":
        target = _eval(n[1], env, scope)
        if isinstance(target, _Env):
            return target.variable(n[2])
        return _field(target, n[2])
    if op == "index":
        target, key = _eval(n[1], env, scope), _eval(n[2], env, scope)
        if isinstance(target, list):
            if _type(key) != "int" or not 0 <= key < len(target):
                raise CelError(f"index {key!r} out of range")
            return target[key]
        return _field(target, key)
    if op == "has":
        target = _eval(n[1], env, scope)
        if not isinstance(target, dict):
            raise CelError(f"has() on {_type(target)}")
        return n[2] in target
    if op == "size":
        v = _eval(n[1], env, scope)
        if _type(v) not in ("string", "list", "map"):
            raise CelError(f"no matching overload: size on {_type(v)}")
        return len(v)
    if op == "!":
        return not _bool(_eval(n[1], env, scope), "!")
    if op in ("&&", "||"):
        return _logical(op, n, env, scope)
    if op == "?:":
        cond = _bool(_eval(n[1], env, scope), "?:")
        return _eval(n[2] if cond else n[3], env, scope)
    if op in ("==", "!="):
        a, b = _eval(n[1], env, scope), _eval(n[2], env, scope)
        return equal(a, b) == (op == "==")
    if op == "in":
        element, container = _eval(n[1], env, scope), _eval(n[2], env, scope)
        if isinstance(container, list):
            return any(equal(element, x) for x in container)
        if isinstance(container, dict):
            return any(equal(element, k) for k in container)
        raise CelError(f"no matching overload: in on {_type(container)}")
    if op == "macro":
        return _macro(n, env, scope)
    raise CelSyntaxError(f"unknown node {op}")


def _field(target, key):
    if not isinstance(target, dict):
        raise CelError(f"no such field {key!r} on {_type(target)}")
    if key not in target:
        raise CelError(f"no such key: {key}")
    return target[key]


def _logical(op, n, env, scope):
    absorbing = op == "||"  # true absorbs ||, false absorbs &&
    err = None
    for side in (n[1], n[2]):
        value, e = _try(lambda: _eval(side, env, scope))
        if e is None and not isinstance(value, bool):
            e = CelError(f"no matching overload: {op} on {_type(value)}")
        if e is None and value == absorbing:
            return absorbing
        err = err or e
    if err is not None:
        raise err
    return not absorbing


def _macro(n, env, scope):
    _, name, target_node, var, body = n
    target = _eval(target_node, env, scope)
    if isinstance(target, dict):
        items = list(target.keys())
    elif isinstance(target, list):
        items = target
    else:
        raise CelError(f"{name}() on {_type(target)}")
    if name == "filter":
        return [x for x in items if _bool(_eval(body, env, dict(scope, **{var: x})), "filter")]
    absorbing = name == "exists"  # true absorbs exists, false absorbs all
    err = None
    for x in items:
        value, e = _try(lambda: _bool(_eval(body, env, dict(scope, **{var: x})), name))
        if e is None and value == absorbing:
            return absorbing
        err = err or e
    if err is not None:
        raise err
    return not absorbing


def evaluate(expression, activation, variables=None):
    """The value of a compiled expression, or CelError. activation: name -> value (JSON-like);
    variables: name -> compiled expression, seen as variables.<name> (lazily, once each)."""
    return _eval(expression, _Env(activation, variables or {}), {})
