#include "tools/kubecomp-sim/trace_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string_view>
#include <unordered_map>

#include "libcore/alloc/gpu_model.hpp"

namespace kc::sim {
namespace {

Error rowError(const std::string& source, std::uint64_t line, const std::string& what) {
  return makeError(kc::errc::kInvalid, source + ":" + std::to_string(line) + ": " + what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits one CSV line on commas. The traces we read never quote fields; a quote is rejected
// rather than misparsed.
Result<std::vector<std::string_view>> splitCsv(std::string_view line, const std::string& source,
                                               std::uint64_t lineNo) {
  if (line.find('"') != std::string_view::npos) {
    return rowError(source, lineNo, "quoted fields are not supported");
  }
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(trim(line.substr(start)));
      break;
    }
    out.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

std::optional<std::int64_t> parseInt(std::string_view s) {
  std::int64_t v = 0;
  const auto* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc{} || ptr != end || s.empty()) {
    return std::nullopt;
  }
  return v;
}

// Decimal seconds -> milliseconds, exact to the millisecond ("12", "12.5", "0.001"), at most
// kMaxTraceSeconds. `tooLarge` is set when the text is a well-formed number above the limit.
std::optional<std::int64_t> parseSecondsMs(std::string_view s, bool* tooLarge = nullptr) {
  if (s.empty()) {
    return std::nullopt;
  }
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (whole.empty() || !std::all_of(whole.begin(), whole.end(), digit)) {
    return std::nullopt;
  }
  std::int64_t frac = 0;
  if (dot != std::string_view::npos) {
    std::string_view f = s.substr(dot + 1);
    if (f.empty() || f.size() > 3 || !std::all_of(f.begin(), f.end(), digit)) {
      return std::nullopt;
    }
    frac = *parseInt(f);
    for (std::size_t i = f.size(); i < 3; ++i) {
      frac *= 10;
    }
  }
  auto w = parseInt(whole);  // fails only on overflow: digits were checked
  if (!w || *w > kMaxTraceSeconds || (*w == kMaxTraceSeconds && frac > 0)) {
    if (tooLarge != nullptr) {
      *tooLarge = true;
    }
    return std::nullopt;
  }
  return *w * kMsPerSecond + frac;
}

// gpu_spec: empty (any GPU) or model names joined by '|' ("V100M16|V100M32"), the rules of
// alloc::GpuModelFilter (the engine parses the same text again).
bool validGpuSpec(std::string_view spec) {
  return alloc::GpuModelFilter::parse(spec, alloc::kGpuSpecSeparator).ok();
}

// Interns gpu_spec texts into Trace::gpuSpecs, validating each distinct text once.
class SpecInterner {
 public:
  explicit SpecInterner(Trace& trace) : trace_(trace) {}
  // The spec's index (0 for an empty spec), or nullopt if it is not model names joined by '|'.
  std::optional<std::uint32_t> intern(std::string_view spec) {
    if (spec.empty()) {
      return 0;
    }
    if (auto it = index_.find(spec); it != index_.end()) {
      return it->second;
    }
    if (!validGpuSpec(spec)) {
      return std::nullopt;
    }
    trace_.gpuSpecs.emplace_back(spec);
    const auto i = static_cast<std::uint32_t>(trace_.gpuSpecs.size() - 1);
    index_.emplace(std::string(spec), i);
    return i;
  }

 private:
  Trace& trace_;
  std::map<std::string, std::uint32_t, std::less<>> index_;
};

const std::string& secondsLimitText() {
  static const std::string text = "the limit of " + std::to_string(kMaxTraceSeconds) + " s";
  return text;
}

Error tooManyRows(const std::string& source, std::uint64_t line) {
  return rowError(source, line,
                  "more than " + std::to_string(kMaxJobs) + " data rows (the limit of one trace)");
}

// Decimal cores -> millicores ("1", "0.5", "80").
std::optional<std::int64_t> parseCoresMilli(std::string_view s) {
  return parseSecondsMs(s);
}

class Header {
 public:
  static Result<Header> parse(std::string_view line, const std::string& source,
                              const std::vector<std::string>& required,
                              const std::vector<std::string>& optional, bool allowUnknown) {
    auto fields = splitCsv(line, source, 1);
    if (!fields) {
      return fields.error();
    }
    Header h;
    h.count_ = fields->size();
    for (std::size_t i = 0; i < fields->size(); ++i) {
      std::string name((*fields)[i]);
      if (!allowUnknown && std::find(required.begin(), required.end(), name) == required.end() &&
          std::find(optional.begin(), optional.end(), name) == optional.end()) {
        return rowError(source, 1, "unknown column '" + name + "'");
      }
      if (!h.index_.emplace(name, i).second) {
        return rowError(source, 1, "duplicate column '" + name + "'");
      }
    }
    for (const auto& r : required) {
      if (!h.index_.contains(r)) {
        return rowError(source, 1, "missing required column '" + r + "'");
      }
    }
    return h;
  }
  std::optional<std::size_t> find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
  std::size_t at(const std::string& name) const { return index_.at(name); }
  std::size_t count() const { return count_; }

 private:
  std::unordered_map<std::string, std::size_t> index_;
  std::size_t count_ = 0;
};

// Reads lines, skipping blank ones, tracking the 1-based line number.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  bool next(std::string& line) {
    while (std::getline(in_, line)) {
      ++lineNo_;
      // A UTF-8 byte order mark (spreadsheet exports write one) is not part of the header.
      if (lineNo_ == 1 && line.starts_with("\xEF\xBB\xBF")) {
        line.erase(0, 3);
      }
      if (!trim(line).empty()) {
        return true;
      }
    }
    return false;
  }
  std::uint64_t lineNo() const { return lineNo_; }

 private:
  std::istream& in_;
  std::uint64_t lineNo_ = 0;
};

void sortByArrival(Trace& trace) {
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const Job& a, const Job& b) { return a.arrival < b.arrival; });
}

template <typename F>
auto withFile(const std::string& path, F&& read) -> decltype(read(std::declval<std::istream&>())) {
  std::ifstream in(path);
  if (!in) {
    return makeError(kc::errc::kUnavailable, "cannot open " + path);
  }
  return read(in);
}

}  // namespace

Result<LoadedTrace> readAlibabaPods(std::istream& in, const std::string& source,
                                    const AlibabaOptions& options) {
  LineReader lines(in);
  std::string line;
  if (!lines.next(line)) {
    return makeError(kc::errc::kInvalid, source + ": empty file (no header)");
  }
  auto header = Header::parse(line, source,
                              {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                               "creation_time", "deletion_time", "scheduled_time"},
                              {}, true);
  if (!header) {
    return header.error();
  }
  const auto phaseCol = header->find("pod_phase");
  const auto specCol = header->find("gpu_spec");
  LoadedTrace out;
  SpecInterner specs(out.trace);
  while (lines.next(line)) {
    const std::uint64_t no = lines.lineNo();
    auto fields = splitCsv(line, source, no);
    if (!fields) {
      return fields.error();
    }
    if (fields->size() != header->count()) {
      return rowError(source, no,
                      "expected " + std::to_string(header->count()) + " fields, got " +
                          std::to_string(fields->size()));
    }
    if (out.stats.rows >= kMaxJobs) {
      return tooManyRows(source, no);
    }
    ++out.stats.rows;
    auto field = [&](const char* name) { return (*fields)[header->at(name)]; };
    auto number = [&](const char* name, bool allowEmpty) -> Result<std::optional<std::int64_t>> {
      const std::string_view f = field(name);
      if (f.empty() && allowEmpty) {
        return std::optional<std::int64_t>{};
      }
      auto v = parseInt(f);
      if (!v) {
        return rowError(source, no,
                        std::string(name) + " is not an integer: '" + std::string(f) + "'");
      }
      if (*v < 0) {
        return rowError(source, no, std::string(name) + " is negative: " + std::to_string(*v));
      }
      return std::optional<std::int64_t>(*v);
    };
    const std::string name(field("name"));
    if (name.empty()) {
      return rowError(source, no, "name is empty");
    }
    auto cpu = number("cpu_milli", false);
    auto mem = number("memory_mib", false);
    auto gpus = number("num_gpu", false);
    auto gpuMilli = number("gpu_milli", false);
    auto created = number("creation_time", false);
    auto deleted = number("deletion_time", true);
    auto scheduled = number("scheduled_time", true);
    for (auto* r : {&cpu, &mem, &gpus, &gpuMilli, &created, &deleted, &scheduled}) {
      if (!*r) {
        return r->error();
      }
    }
    const std::string_view spec = specCol ? (*fields)[*specCol] : std::string_view{};
    const auto specIndex = specs.intern(spec);
    if (!specIndex) {
      return rowError(source, no,
                      "gpu_spec is not GPU model names joined by '|': '" + std::string(spec) + "'");
    }
    if (**gpus > 64) {
      return rowError(source, no, "num_gpu out of range: " + std::to_string(**gpus));
    }
    if (**gpuMilli > 1000) {
      return rowError(source, no, "gpu_milli above 1000: " + std::to_string(**gpuMilli));
    }
    for (const auto* t : {&created, &deleted, &scheduled}) {
      if (**t && ***t > kMaxTraceSeconds) {
        return rowError(source, no,
                        "time " + std::to_string(***t) + " s is above " + secondsLimitText());
      }
    }
    // Validate what is present before deciding to skip, so a bad row is never hidden by a skip.
    if (*scheduled && **scheduled < **created) {
      return rowError(source, no, "scheduled_time before creation_time");
    }
    if (*scheduled && *deleted && **deleted < **scheduled) {
      return rowError(source, no, "negative duration (deletion_time before scheduled_time)");
    }
    if (**gpus == 0 && !options.includeCpuOnly) {
      ++out.stats.skippedCpuOnly;
      continue;
    }
    if (!*scheduled) {
      ++out.stats.skippedNoStartTime;
      continue;
    }
    if (!*deleted) {
      ++out.stats.skippedNoEndTime;
      continue;
    }
    const bool censored = phaseCol && (*fields)[*phaseCol] == "Running";
    if (censored && options.skipCensored) {
      ++out.stats.skippedCensored;
      continue;
    }
    const bool sharing = **gpus >= 1 && **gpuMilli < 1000;
    if (sharing) {
      if (options.sharing == GpuSharing::Skip) {
        ++out.stats.skippedGpuSharing;
        continue;
      }
      ++out.stats.gpuSharingAsWhole;
    }
    if (censored) {
      ++out.stats.censoredRunning;
    }
    Job job;
    job.id = name;
    job.arrival = **created * kMsPerSecond;
    job.duration = (**deleted - **scheduled) * kMsPerSecond;
    job.gpus = static_cast<std::uint32_t>(**gpus);
    job.cpuMilli = **cpu;
    job.memoryMib = **mem;
    if (job.gpus > 0 && *specIndex != 0) {  // a CPU-only task needs no GPU model
      job.gpuSpec = *specIndex;
      ++out.stats.gpuSpecConstrained;
    }
    if (job.duration == 0) {
      ++out.stats.zeroDuration;
    }
    out.trace.jobs.push_back(std::move(job));
    ++out.stats.jobs;
  }
  sortByArrival(out.trace);
  return out;
}

Result<LoadedTrace> readAlibabaPodsFile(const std::string& path, const AlibabaOptions& options) {
  return withFile(path, [&](std::istream& in) { return readAlibabaPods(in, path, options); });
}

Result<std::vector<NodeSpec>> readAlibabaNodes(std::istream& in, const std::string& source) {
  LineReader lines(in);
  std::string line;
  if (!lines.next(line)) {
    return makeError(kc::errc::kInvalid, source + ": empty file (no header)");
  }
  auto header = Header::parse(line, source, {"sn", "cpu_milli", "memory_mib", "gpu"}, {}, true);
  if (!header) {
    return header.error();
  }
  const auto modelCol = header->find("model");
  std::vector<NodeSpec> nodes;
  std::uint64_t gpuTotal = 0;
  while (lines.next(line)) {
    const std::uint64_t no = lines.lineNo();
    auto fields = splitCsv(line, source, no);
    if (!fields) {
      return fields.error();
    }
    if (fields->size() != header->count()) {
      return rowError(source, no,
                      "expected " + std::to_string(header->count()) + " fields, got " +
                          std::to_string(fields->size()));
    }
    NodeSpec n;
    n.name = std::string((*fields)[header->at("sn")]);
    if (n.name.empty()) {
      return rowError(source, no, "sn is empty");
    }
    std::int64_t vals[3] = {};
    const char* cols[3] = {"cpu_milli", "memory_mib", "gpu"};
    for (int i = 0; i < 3; ++i) {
      auto v = parseInt((*fields)[header->at(cols[i])]);
      if (!v || *v < 0) {
        return rowError(source, no, std::string(cols[i]) + " is not a non-negative integer");
      }
      vals[i] = *v;
    }
    if (vals[2] > 1024) {
      return rowError(source, no, "gpu out of range (0..1024)");
    }
    if (nodes.size() >= kMaxNodes) {
      return rowError(source, no, "more than " + std::to_string(kMaxNodes) + " nodes (the limit)");
    }
    gpuTotal += static_cast<std::uint64_t>(vals[2]);
    if (gpuTotal > kMaxGpus) {
      return rowError(source, no, "more than " + std::to_string(kMaxGpus) + " GPUs (the limit)");
    }
    if (modelCol) {
      // The published list writes an empty model (pandas: nan) for GPU-less nodes.
      const std::string_view model = (*fields)[*modelCol];
      if (!model.empty() && !alloc::validGpuModelName(model)) {
        return rowError(source, no, "model is not a GPU model name: '" + std::string(model) + "'");
      }
      n.model = std::string(model);
    }
    n.cpuMilli = vals[0];
    n.memoryMib = vals[1];
    n.gpus = static_cast<std::uint32_t>(vals[2]);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Result<std::vector<NodeSpec>> readAlibabaNodesFile(const std::string& path) {
  return withFile(path, [&](std::istream& in) { return readAlibabaNodes(in, path); });
}

Result<LoadedTrace> readJobCsv(std::istream& in, const std::string& source) {
  LineReader lines(in);
  std::string line;
  if (!lines.next(line)) {
    return makeError(kc::errc::kInvalid, source + ": empty file (no header)");
  }
  auto header = Header::parse(line, source, {"arrival_s", "duration_s", "gpus"},
                              {"id", "cpu", "memory_mib", "gpu_spec"}, false);
  if (!header) {
    return header.error();
  }
  const auto idCol = header->find("id");
  const auto cpuCol = header->find("cpu");
  const auto memCol = header->find("memory_mib");
  const auto specCol = header->find("gpu_spec");
  LoadedTrace out;
  SpecInterner specs(out.trace);
  while (lines.next(line)) {
    const std::uint64_t no = lines.lineNo();
    auto fields = splitCsv(line, source, no);
    if (!fields) {
      return fields.error();
    }
    if (fields->size() != header->count()) {
      return rowError(source, no,
                      "expected " + std::to_string(header->count()) + " fields, got " +
                          std::to_string(fields->size()));
    }
    if (out.stats.rows >= kMaxJobs) {
      return tooManyRows(source, no);
    }
    ++out.stats.rows;
    Job job;
    job.id = idCol ? std::string((*fields)[*idCol]) : "job-" + std::to_string(out.stats.rows);
    auto time = [&](const char* col, SimMs& dst) -> Status {
      const std::string_view f = (*fields)[header->at(col)];
      if (!f.empty() && f.front() == '-') {
        return rowError(source, no, std::string(col) + " is negative: " + std::string(f));
      }
      bool tooLarge = false;
      auto v = parseSecondsMs(f, &tooLarge);
      if (tooLarge) {
        return rowError(
            source, no,
            std::string(col) + " " + std::string(f) + " is above " + secondsLimitText());
      }
      if (!v) {
        return rowError(source, no,
                        std::string(col) +
                            " is not a number of seconds (>= 0, at most 3 decimals): '" +
                            std::string(f) + "'");
      }
      dst = *v;
      return okStatus();
    };
    if (auto s = time("arrival_s", job.arrival); !s) {
      return s.error();
    }
    if (auto s = time("duration_s", job.duration); !s) {
      return s.error();
    }
    const std::string_view g = (*fields)[header->at("gpus")];
    auto gv = parseInt(g);
    if (!gv || *gv < 0 || *gv > 1024) {
      return rowError(source, no, "gpus is not an integer in 0..1024: '" + std::string(g) + "'");
    }
    job.gpus = static_cast<std::uint32_t>(*gv);
    if (cpuCol) {
      auto c = parseCoresMilli((*fields)[*cpuCol]);
      if (!c) {
        return rowError(
            source, no,
            "cpu is not a non-negative number of cores: '" + std::string((*fields)[*cpuCol]) + "'");
      }
      job.cpuMilli = *c;
    }
    if (memCol) {
      auto m = parseInt((*fields)[*memCol]);
      if (!m || *m < 0) {
        return rowError(
            source, no,
            "memory_mib is not a non-negative integer: '" + std::string((*fields)[*memCol]) + "'");
      }
      job.memoryMib = *m;
    }
    if (specCol) {
      const std::string_view spec = (*fields)[*specCol];
      const auto specIndex = specs.intern(spec);
      if (!specIndex) {
        return rowError(
            source, no,
            "gpu_spec is not GPU model names joined by '|': '" + std::string(spec) + "'");
      }
      if (*specIndex != 0 && job.gpus > 0) {
        job.gpuSpec = *specIndex;
        ++out.stats.gpuSpecConstrained;
      }
    }
    if (job.duration == 0) {
      ++out.stats.zeroDuration;
    }
    out.trace.jobs.push_back(std::move(job));
    ++out.stats.jobs;
  }
  sortByArrival(out.trace);
  return out;
}

Result<LoadedTrace> readJobCsvFile(const std::string& path) {
  return withFile(path, [&](std::istream& in) { return readJobCsv(in, path); });
}

namespace {
std::string formatMs(SimMs ms) {
  char buf[32];
  const SimMs frac = ms % kMsPerSecond;
  int n =
      frac == 0
          ? std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(ms / kMsPerSecond))
          : std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ms / kMsPerSecond),
                          static_cast<long long>(frac));
  std::string s(buf, static_cast<std::size_t>(n));
  if (frac != 0) {
    while (s.back() == '0') {
      s.pop_back();
    }
  }
  return s;
}
}  // namespace

void writeJobCsv(std::ostream& out, const Trace& trace) {
  // The gpu_spec column only when some job has a constraint: older readers keep working.
  const bool specs = std::any_of(trace.jobs.begin(), trace.jobs.end(),
                                 [](const Job& j) { return j.gpuSpec != 0; });
  out << "id,arrival_s,duration_s,gpus,cpu,memory_mib" << (specs ? ",gpu_spec\n" : "\n");
  for (const Job& j : trace.jobs) {
    out << j.id << ',' << formatMs(j.arrival) << ',' << formatMs(j.duration) << ',' << j.gpus << ','
        << formatMs(j.cpuMilli) << ',' << j.memoryMib;
    if (specs) {
      out << ',' << trace.specOf(j);
    }
    out << '\n';
  }
}

}  // namespace kc::sim
