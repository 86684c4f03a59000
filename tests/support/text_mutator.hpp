#pragma once
// Seeded text mutation for the parsers' fuzz cases ([fuzz]): a document a writer produced,
// changed in a few random places (a character replaced, a run deleted, a character inserted),
// the way a truncated, corrupted or hand-edited copy looks. Deterministic for a seed.

#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace kc::testing {

// 1..maxEdits edits of `seed`, characters drawn from `alphabet` (non-empty).
inline std::string mutateText(std::string text, std::mt19937& rng, std::string_view alphabet,
                              int maxEdits = 6) {
  const int edits = 1 + static_cast<int>(rng() % static_cast<unsigned>(maxEdits));
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const std::size_t pos = rng() % text.size();
    switch (rng() % 3) {
      case 0:
        text[pos] = alphabet[rng() % alphabet.size()];
        break;
      case 1:
        text.erase(pos, 1 + rng() % 8);
        break;
      default:
        text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
    }
  }
  return text;
}

}  // namespace kc::testing
