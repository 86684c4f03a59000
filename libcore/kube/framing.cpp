#include "libcore/kube/framing.hpp"

namespace kc::kube {

bool LineFramer::feed(std::string_view chunk, const std::function<bool(std::string_view)>& onLine) {
  buf_.append(chunk);
  bool keepGoing = true;
  while (keepGoing) {
    std::size_t nl = buf_.find('\n', start_);
    if (nl == std::string::npos) {
      break;
    }
    std::string_view line(buf_.data() + start_, nl - start_);
    start_ = nl + 1;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (!line.empty()) {
      keepGoing = onLine(line);
    }
  }
  // Compact once the consumed prefix dominates, so a long stream does not grow the buffer.
  if (start_ == buf_.size()) {
    buf_.clear();
    start_ = 0;
  } else if (start_ > 4096 && start_ * 2 > buf_.size()) {
    buf_.erase(0, start_);
    start_ = 0;
  }
  return keepGoing;
}

kc::Status ListBodyParser::fail(std::string msg) {
  failed_ = true;
  return kc::makeError(kc::errc::kInvalid, "list body: " + msg);
}

void ListBodyParser::scanStringByte(char c) {
  if (escape_) {
    escape_ = false;
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    inString_ = false;
    if (collectingKey_) {
      collectingKey_ = false;
    }
  } else if (collectingKey_) {
    lastKey_.push_back(c);
  }
}

kc::Result<ListBodyParser::Boundary> ListBodyParser::scanStructuralByte(char c) {
  const bool betweenItems = inItems_ && !inItem_ && depth_ == 2;
  switch (c) {
    case '"':
      if (betweenItems) {
        return fail("an element of items is not an object").error();
      }
      inString_ = true;
      if (depth_ == 1 && !inItems_) {
        // A string at the top level is either a key or a scalar value; a value resets
        // lastKey_ on the following ',' anyway, so collecting it is harmless.
        collectingKey_ = true;
        lastKey_.clear();
      }
      return Boundary::kNone;
    case '{':
    case '[':
      if (depth_ == 0) {
        if (c != '{') {
          return fail("top level is not an object").error();
        }
        sawTopLevel_ = true;
      }
      if (betweenItems && c != '{') {
        return fail("an element of items is not an object").error();
      }
      if (betweenItems) {
        itemDepth_ = depth_ + 1;
      }
      ++depth_;
      if (depth_ == 2 && c == '[' && lastKey_ == "items") {
        inItems_ = true;
      }
      return betweenItems ? Boundary::kItemOpens : Boundary::kNone;
    case '}':
    case ']':
      if (depth_ == 0) {
        return fail("unbalanced brackets").error();
      }
      --depth_;
      if (inItem_ && depth_ + 1 == itemDepth_) {
        return Boundary::kItemCloses;
      }
      if (inItems_ && depth_ == 1) {
        inItems_ = false;
      }
      return Boundary::kNone;
    case ',':
      if (depth_ == 1) {
        lastKey_.clear();
      }
      // Separator between items: dropped, so the skeleton keeps "items":[].
      return betweenItems ? Boundary::kItemSeparator : Boundary::kNone;
    default:
      if (betweenItems && c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        return fail("an element of items is not an object").error();
      }
      return Boundary::kNone;
  }
}

kc::Status ListBodyParser::emitItem() {
  ++items_;
  auto parsed = nlohmann::json::parse(item_, nullptr, /*allow_exceptions=*/false);
  item_.clear();
  if (parsed.is_discarded()) {
    return fail("item " + std::to_string(items_) + " is not valid JSON");
  }
  if (auto st = onItem_(std::move(parsed)); !st) {
    failed_ = true;
    return st;
  }
  return kc::okStatus();
}

kc::Status ListBodyParser::feed(std::string_view chunk) {
  if (failed_) {
    return kc::makeError(kc::errc::kInvalid, "list body: parser already failed");
  }
  // A byte-level scanner that tracks strings and nesting; JSON validity of each piece is
  // left to nlohmann::json when the item / skeleton is parsed.
  std::size_t segStart = 0;  // start of the run of bytes going to the current sink
  auto flush = [&](std::size_t end) {
    if (end > segStart) {
      (inItem_ ? item_ : skeleton_).append(chunk.substr(segStart, end - segStart));
    }
    segStart = end;
  };
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    const char c = chunk[i];
    if (inString_) {
      scanStringByte(c);
      continue;
    }
    auto boundary = scanStructuralByte(c);
    if (!boundary) {
      return boundary.error();
    }
    switch (*boundary) {
      case Boundary::kNone:
        break;
      case Boundary::kItemOpens:
        flush(i);
        inItem_ = true;
        break;
      case Boundary::kItemCloses:
        flush(i + 1);
        inItem_ = false;
        if (auto st = emitItem(); !st) {
          return st;
        }
        break;
      case Boundary::kItemSeparator:
        flush(i);
        segStart = i + 1;
        break;
    }
  }
  flush(chunk.size());
  return kc::okStatus();
}

kc::Result<nlohmann::json> ListBodyParser::finish() {
  if (failed_) {
    return kc::makeError(kc::errc::kInvalid, "list body: parser failed");
  }
  if (!sawTopLevel_ || depth_ != 0 || inString_) {
    return kc::makeError(kc::errc::kInvalid, "list body: truncated");
  }
  auto parsed = nlohmann::json::parse(skeleton_, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return kc::makeError(kc::errc::kInvalid, "list body: not a valid JSON object");
  }
  parsed.erase("items");
  return parsed;
}

}  // namespace kc::kube
