// chart-render: renders a Helm (v3) chart offline, as `helm template` does, for the chart
// tests (helm is not packaged for Debian). Go's text/template with the sprig function
// library (Debian golang-github-masterminds-sprig-dev) plus Helm's own functions (include,
// tpl, required, toYaml, fromYaml, toJson, fromJson) and .Files.Get. Stricter than Helm on purpose: a
// template that reads a value the chart's values.yaml does not declare fails
// (missingkey=error), and every rendered document must be a YAML mapping with apiVersion,
// kind and metadata.name, unique per kind/namespace/name.
//
// Usage: chart-render [-f values.yaml]... [--set path=value]... [--namespace ns]
//                     [--release-name name] [--include-crds] [--set-matrix file] <chart-dir>
// --set-matrix renders once per line of the file, each line a space-separated list of
// path=value applied after the other values (the tests' toggle combinations in one process);
// each rendering is preceded by the line "# chart-render matrix <line number>".
// Output: the rendered documents on stdout, each preceded by "# Source: <file>", in Helm's
// install order (namespaces, CRDs, accounts, RBAC, ... workloads). Exit 1 on any error.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	chartDir    string
	valueFiles  listFlag
	sets        listFlag
	namespace   string
	release     string
	includeCrds bool
	matrix      string
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart-render: "+format+"\n", args...)
	os.Exit(1)
}

// Set by the build (-ldflags -X main.version=...): the project version of CMakeLists.txt.
var version = "unknown"

// usageError reports a bad command line: exit 2, as every binary of the suite does.
func usageError(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart-render: "+format+"\n", args...)
	os.Exit(2)
}

func parseArgs(args []string) options {
	o := options{namespace: "default", release: "kubecomp"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 >= len(args) {
				usageError("%s needs a value", a)
			}
			i++
			return args[i]
		}
		switch {
		case a == "-f" || a == "--values":
			o.valueFiles = append(o.valueFiles, next())
		case a == "--set":
			o.sets = append(o.sets, next())
		case a == "--namespace" || a == "-n":
			o.namespace = next()
		case a == "--release-name":
			o.release = next()
		case a == "--set-matrix":
			o.matrix = next()
		case a == "--include-crds":
			o.includeCrds = true
		case a == "--version":
			fmt.Printf("chart-render %s\n", version)
			os.Exit(0)
		case a == "-h" || a == "--help":
			fmt.Println("usage: chart-render [-f values.yaml]... [--set path=value]... [--namespace ns] [--release-name name] [--include-crds] [--version] <chart-dir>")
			os.Exit(0)
		case strings.HasPrefix(a, "-"):
			usageError("unknown flag %s", a)
		default:
			if o.chartDir != "" {
				usageError("one chart directory only (got %s and %s)", o.chartDir, a)
			}
			o.chartDir = a
		}
	}
	if o.chartDir == "" {
		usageError("no chart directory given")
	}
	return o
}

// normalize turns yaml.v3's decoded values into the shapes templates expect
// (map[string]interface{} all the way down).
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []interface{}:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	}
	return v
}

func readYamlMap(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		fail("%s: %v", path, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return normalize(m).(map[string]interface{})
}

// mergeInto overlays src onto dst as Helm does for values files: maps merge key by key,
// anything else replaces; a null in src deletes the key.
func mergeInto(dst, src map[string]interface{}) {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			mergeInto(dm, sm)
		} else {
			dst[k] = sv
		}
	}
}

// applySet handles --set a.b.c=value: the value is read as YAML scalar (true, 3, text).
// Unlike Helm, the path must already exist in the values (a typo fails instead of adding a
// key nobody reads).
func applySet(values map[string]interface{}, expr string) {
	eq := strings.Index(expr, "=")
	if eq <= 0 {
		fail("--set %q: want path=value", expr)
	}
	path := strings.Split(expr[:eq], ".")
	var value interface{}
	if err := yaml.Unmarshal([]byte(expr[eq+1:]), &value); err != nil {
		fail("--set %q: %v", expr, err)
	}
	cur := values
	for i, key := range path {
		old, ok := cur[key]
		if !ok {
			fail("--set %q: %s is not a value of this chart", expr, strings.Join(path[:i+1], "."))
		}
		if i == len(path)-1 {
			if _, isMap := old.(map[string]interface{}); isMap {
				fail("--set %q: %s is a map, not a value", expr, expr[:eq])
			}
			cur[key] = normalize(value)
			return
		}
		next, isMap := old.(map[string]interface{})
		if !isMap {
			fail("--set %q: %s is not a map", expr, strings.Join(path[:i+1], "."))
		}
		cur = next
	}
}

func toYaml(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYaml(s string) map[string]interface{} {
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	if m == nil {
		return map[string]interface{}{}
	}
	return normalize(m).(map[string]interface{})
}

// Helm's install order (pkg/releaseutil/kind_sorter.go, InstallOrder), as facts.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

type document struct {
	source string
	text   string
	kind   string
	key    string
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitDocuments cuts one template's output into YAML documents, drops the empty ones
// (whitespace and comments only) and checks each is a Kubernetes object.
func splitDocuments(source, out, namespace string) []document {
	var docs []document
	for _, part := range docSeparator.Split(out, -1) {
		var obj map[string]interface{}
		if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
			fail("%s: rendered YAML does not parse: %v\n%s", source, err, part)
		}
		if obj == nil {
			continue
		}
		obj = normalize(obj).(map[string]interface{})
		api, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]interface{})
		var name, ns string
		if meta != nil {
			name, _ = meta["name"].(string)
			ns, _ = meta["namespace"].(string)
		}
		if api == "" || kind == "" || name == "" {
			fail("%s: a rendered document lacks apiVersion, kind or metadata.name:\n%s", source, part)
		}
		docs = append(docs, document{source: source, text: strings.Trim(part, "\n"), kind: kind,
			key: kind + "/" + ns + "/" + name})
	}
	return docs
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func main() {
	o := parseArgs(os.Args[1:])
	chartMeta := readYamlMap(filepath.Join(o.chartDir, "Chart.yaml"))
	chartName, _ := chartMeta["name"].(string)
	if chartName == "" {
		fail("%s/Chart.yaml has no name", o.chartDir)
	}
	if v, _ := chartMeta["apiVersion"].(string); v != "v2" {
		fail("%s/Chart.yaml: apiVersion must be v2 (Helm 3)", o.chartDir)
	}
	// Values from scratch for each rendering: templates may not see another rendering's.
	loadValues := func(extra []string) map[string]interface{} {
		values := readYamlMap(filepath.Join(o.chartDir, "values.yaml"))
		for _, f := range o.valueFiles {
			mergeInto(values, readYamlMap(f))
		}
		for _, s := range append(append([]string{}, o.sets...), extra...) {
			applySet(values, s)
		}
		return values
	}

	chart := map[string]interface{}{
		"Name": chartName, "Version": chartMeta["version"], "AppVersion": chartMeta["appVersion"],
		"Description": chartMeta["description"],
	}
	release := map[string]interface{}{
		"Name": o.release, "Namespace": o.namespace, "Service": "Helm", "IsInstall": true,
		"IsUpgrade": false, "Revision": 1,
	}

	root := template.New(chartName).Option("missingkey=error")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env") // Helm removes these two: a chart must not read the renderer's environment
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYaml
	funcs["fromYaml"] = fromYaml
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	root.Funcs(funcs)

	tdir := filepath.Join(o.chartDir, "templates")
	var files []string
	err := filepath.Walk(tdir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tpl") || strings.HasSuffix(p, ".txt")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		fail("%v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail("%v", err)
		}
		rel, _ := filepath.Rel(o.chartDir, f)
		if _, err := root.New(chartName + "/" + rel).Parse(string(data)); err != nil {
			fail("%v", err)
		}
	}

	if o.matrix == "" {
		os.Stdout.WriteString(renderOnce(o, root, files, chartName, chart, release, loadValues(nil)))
		return
	}
	data, err := os.ReadFile(o.matrix)
	if err != nil {
		fail("%v", err)
	}
	var out strings.Builder
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		out.WriteString(fmt.Sprintf("# chart-render matrix %d\n", i+1))
		out.WriteString(renderOnce(o, root, files, chartName, chart, release, loadValues(strings.Fields(line))))
	}
	os.Stdout.WriteString(out.String())
}

// chartFiles is .Files: Get returns a chart file's text, as Helm's Files.Get does, but a path
// outside the chart, under templates/, or that does not exist is an error (Helm returns "").
type chartFiles struct{ dir string }

func (f chartFiles) Get(name string) (string, error) {
	clean := filepath.Clean(name)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") ||
		strings.HasPrefix(clean, "templates/") {
		return "", fmt.Errorf(".Files.Get %q: not a chart file outside templates/", name)
	}
	data, err := os.ReadFile(filepath.Join(f.dir, clean))
	if err != nil {
		return "", fmt.Errorf(".Files.Get %q: %v", name, err)
	}
	return string(data), nil
}

// renderOnce renders every template with these values, as helm template prints them.
func renderOnce(o options, root *template.Template, files []string, chartName string, chart, release map[string]interface{},
	values map[string]interface{}) string {
	top := map[string]interface{}{
		"Values": values, "Chart": chart, "Release": release,
		"Capabilities": map[string]interface{}{"KubeVersion": map[string]interface{}{"Version": "v1.27.0", "Major": "1", "Minor": "27"}},
		"Template":     map[string]interface{}{"BasePath": chartName + "/templates"},
		"Files":        chartFiles{dir: o.chartDir},
	}
	var docs []document
	seen := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(o.chartDir, f)
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") || strings.HasSuffix(base, ".txt") {
			continue // partials and NOTES are not objects
		}
		name := chartName + "/" + rel
		top["Template"].(map[string]interface{})["Name"] = name
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, top); err != nil {
			fail("%v", err)
		}
		for _, d := range splitDocuments(name, buf.String(), o.namespace) {
			if prev, dup := seen[d.key]; dup {
				fail("%s: %s is rendered twice (also by %s)", name, d.key, prev)
			}
			seen[d.key] = name
			docs = append(docs, d)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return kindRank(docs[i].kind) < kindRank(docs[j].kind) })

	var out strings.Builder
	if o.includeCrds {
		crdFiles, _ := filepath.Glob(filepath.Join(o.chartDir, "crds", "*.yaml"))
		sort.Strings(crdFiles)
		for _, f := range crdFiles {
			data, err := os.ReadFile(f)
			if err != nil {
				fail("%v", err)
			}
			rel, _ := filepath.Rel(o.chartDir, f)
			for _, d := range splitDocuments(chartName+"/"+rel, string(data), o.namespace) {
				out.WriteString("---\n# Source: " + d.source + "\n" + d.text + "\n")
			}
		}
	}
	for _, d := range docs {
		out.WriteString("---\n# Source: " + d.source + "\n" + d.text + "\n")
	}
	return out.String()
}
