#pragma once
// Incremental framing of apiserver bodies that arrive in arbitrary pieces.
// - LineFramer: watch streams are newline-delimited JSON objects; a network chunk may hold
//   part of an event, several events, or end in the middle of a multi-byte character.
// - ListBodyParser: a LIST body is one JSON object whose "items" array can be hundreds of MB;
//   it hands out each item as soon as its closing brace arrives, so neither the whole body
//   text nor a DOM of the whole list is ever held.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::kube {

class LineFramer {
 public:
  // Calls onLine for every complete line (without '\n'; a trailing '\r' is dropped; blank
  // lines skipped). onLine returns false to stop; the rest stays buffered. Returns false if
  // stopped.
  bool feed(std::string_view chunk, const std::function<bool(std::string_view)>& onLine);
  std::size_t buffered() const { return buf_.size() - start_; }
  void reset() {
    buf_.clear();
    start_ = 0;
  }

 private:
  std::string buf_;
  std::size_t start_ = 0;
};

class ListBodyParser {
 public:
  using ItemFn = std::function<kc::Status(nlohmann::json&&)>;
  explicit ListBodyParser(ItemFn onItem) : onItem_(std::move(onItem)) {}

  // Feeds the next piece of the body. Errors on malformed JSON or when onItem fails.
  kc::Status feed(std::string_view chunk);
  // After the last piece: the list object without its items (kind, apiVersion, metadata
  // with resourceVersion and continue). Errors if the body was incomplete.
  kc::Result<nlohmann::json> finish();
  std::size_t itemCount() const { return items_; }

 private:
  // What a byte outside strings means for where the bytes go.
  enum class Boundary : std::uint8_t {
    kNone,
    kItemOpens,      // an element of items starts at this byte
    kItemCloses,     // the element ends with this byte
    kItemSeparator,  // the ',' between two elements (dropped)
  };

  kc::Status fail(std::string msg);
  void scanStringByte(char c);
  // Updates nesting and key state; errors when the body is not a list object.
  kc::Result<Boundary> scanStructuralByte(char c);
  // Parses the completed item_ and hands it to onItem_.
  kc::Status emitItem();

  ItemFn onItem_;
  std::string skeleton_;  // every byte outside the items array's elements
  std::string item_;      // bytes of the item being read
  int depth_ = 0;         // nesting depth of {} and []
  bool inString_ = false;
  bool escape_ = false;
  bool inItems_ = false;  // inside the top-level "items" array
  bool inItem_ = false;
  int itemDepth_ = 0;    // depth at which the current item opened
  std::string lastKey_;  // last top-level key, to recognise "items"
  bool collectingKey_ = false;
  bool failed_ = false;
  bool sawTopLevel_ = false;
  std::size_t items_ = 0;
};

}  // namespace kc::kube
