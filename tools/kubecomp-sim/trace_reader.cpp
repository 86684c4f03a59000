#include "tools/kubecomp-sim/trace_reader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
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

// "nan" (any case) is how pandas writes an empty cell; the Alibaba trace's README reads it in
// gpu_spec as "no constraint" and in a node's model as "no GPU model".
bool isNan(std::string_view s) {
  return s.size() == 3 && (s[0] == 'n' || s[0] == 'N') && (s[1] == 'a' || s[1] == 'A') &&
         (s[2] == 'n' || s[2] == 'N');
}

// Interns gpu_spec texts into Trace::gpuSpecs, validating each distinct text once.
class SpecInterner {
 public:
  explicit SpecInterner(Trace& trace) : trace_(trace) {}
  // The spec's index (0 for an empty or "nan" spec), or nullopt if it is not model names
  // joined by '|'.
  std::optional<std::uint32_t> intern(std::string_view spec) {
    if (spec.empty() || isNan(spec)) {
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
        return rowError(source, 1, "unknown column " + quoteInput(name));
      }
      if (!h.index_.emplace(name, i).second) {
        return rowError(source, 1, "duplicate column " + quoteInput(name));
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

// Reads lines of at most kMaxLineBytes, skipping blank ones, tracking the 1-based line number.
// A longer line is an error naming it, found after reading at most kMaxLineBytes + 1 bytes of
// it (one buffer, allocated on the first line), so no input grows memory past the limit.
class LineReader {
 public:
  LineReader(std::istream& in, const std::string& source) : in_(in), source_(source) {}
  // true: `line` holds the next non-blank line; false: the input is over.
  Result<bool> next(std::string& line) {
    while (true) {
      auto more = readLine(line);
      if (!more || !*more) {
        return more;
      }
      // A UTF-8 byte order mark (spreadsheet exports write one) is not part of the header.
      if (lineNo_ == 1 && line.starts_with("\xEF\xBB\xBF")) {
        line.erase(0, 3);
      }
      if (!trim(line).empty()) {
        return true;
      }
    }
  }
  std::uint64_t lineNo() const { return lineNo_; }

 private:
  Result<bool> readLine(std::string& line) {
    buffer_.resize(kMaxLineBytes + 2);  // the line, one byte more, and getline's '\0'
    in_.getline(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    const auto count = static_cast<std::size_t>(in_.gcount());  // with the '\n' if read
    if (in_.bad()) {
      return makeError(kc::errc::kUnavailable, source_ + ": read error");
    }
    if (in_.fail() && in_.eof() && count == 0) {
      return false;
    }
    ++lineNo_;
    // fail() without eof(): the buffer filled before a '\n'.
    const std::size_t length = in_.eof() ? count : (in_.fail() ? count : count - 1);
    if (length > kMaxLineBytes) {
      return rowError(source_, lineNo_,
                      "line longer than " + std::to_string(kMaxLineBytes) + " bytes (the limit)");
    }
    line.assign(buffer_.data(), length);
    return true;
  }

  std::istream& in_;
  const std::string& source_;
  std::vector<char> buffer_;
  std::uint64_t lineNo_ = 0;
};

void sortByArrival(Trace& trace) {
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const Job& a, const Job& b) { return a.arrival < b.arrival; });
}

// Opens a trace file: a regular file, or a symlink to one. A directory, device (/dev/zero),
// FIFO or socket is refused by name before anything is read (a read would fail oddly, never
// end, or wait for a writer).
template <typename F>
auto withFile(const std::string& path, F&& read) -> decltype(read(std::declval<std::istream&>())) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return makeError(kc::errc::kUnavailable, "cannot open " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return makeError(kc::errc::kInvalid,
                     path + ": not a regular file (" +
                         (S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket") + ")");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return makeError(kc::errc::kUnavailable, "cannot open " + path);
  }
  return read(in);
}

// A CSV input: its header, then its data rows split into fields, each checked against the
// header's field count; the line reading and splitting every reader shares.
class CsvRows {
 public:
  CsvRows(std::istream& in, const std::string& source) : lines_(in, source), source_(source) {}
  Status readHeader(const std::vector<std::string>& required,
                    const std::vector<std::string>& optional, bool allowUnknown) {
    auto first = lines_.next(line_);
    if (!first) {
      return first.error();
    }
    if (!*first) {
      return makeError(kc::errc::kInvalid, source_ + ": empty file (no header)");
    }
    auto header = Header::parse(line_, source_, required, optional, allowUnknown);
    if (!header) {
      return header.error();
    }
    header_ = std::move(*header);
    return okStatus();
  }
  // true: fields() holds the next data row; false: the input is over.
  Result<bool> next() {
    auto more = lines_.next(line_);
    if (!more || !*more) {
      return more;
    }
    auto fields = splitCsv(line_, source_, lineNo());
    if (!fields) {
      return fields.error();
    }
    if (fields->size() != header_.count()) {
      return error("expected " + std::to_string(header_.count()) + " fields, got " +
                   std::to_string(fields->size()));
    }
    fields_ = std::move(*fields);
    return true;
  }
  const Header& header() const { return header_; }
  std::string_view field(const std::string& column) const { return fields_[header_.at(column)]; }
  std::string_view field(std::size_t index) const { return fields_[index]; }
  std::uint64_t lineNo() const { return lines_.lineNo(); }
  // "<source>:<line>: <what>" for the current row.
  Error error(const std::string& what) const { return rowError(source_, lineNo(), what); }

 private:
  LineReader lines_;
  const std::string& source_;
  std::string line_;
  std::vector<std::string_view> fields_;
  Header header_;
};

// The numbers of one pod-list row, validated (present ones non-negative, times within the
// limit, in order); a row that will be skipped is validated all the same.
struct PodRow {
  std::int64_t cpu = 0;
  std::int64_t mem = 0;
  std::int64_t gpus = 0;
  std::int64_t gpuMilli = 0;
  std::int64_t created = 0;
  std::optional<std::int64_t> deleted;
  std::optional<std::int64_t> scheduled;
};

Result<PodRow> parsePodRow(const CsvRows& rows) {
  auto number = [&](const char* name, bool allowEmpty) -> Result<std::optional<std::int64_t>> {
    const std::string_view f = rows.field(name);
    if (f.empty() && allowEmpty) {
      return std::optional<std::int64_t>{};
    }
    auto v = parseInt(f);
    if (!v) {
      return rows.error(std::string(name) + " is not an integer: " + quoteInput(f));
    }
    if (*v < 0) {
      return rows.error(std::string(name) + " is negative: " + std::to_string(*v));
    }
    return std::optional<std::int64_t>(*v);
  };
  PodRow r;
  const std::pair<const char*, std::int64_t*> required[] = {{"cpu_milli", &r.cpu},
                                                            {"memory_mib", &r.mem},
                                                            {"num_gpu", &r.gpus},
                                                            {"gpu_milli", &r.gpuMilli},
                                                            {"creation_time", &r.created}};
  for (const auto& [name, dst] : required) {
    auto v = number(name, false);
    if (!v) {
      return v.error();
    }
    *dst = **v;
  }
  for (const auto& [name, dst] :
       {std::pair{"deletion_time", &r.deleted}, std::pair{"scheduled_time", &r.scheduled}}) {
    auto v = number(name, true);
    if (!v) {
      return v.error();
    }
    *dst = *v;
  }
  if (r.gpus > 64) {
    return rows.error("num_gpu out of range: " + std::to_string(r.gpus));
  }
  if (r.gpuMilli > 1000) {
    return rows.error("gpu_milli above 1000: " + std::to_string(r.gpuMilli));
  }
  for (const std::optional<std::int64_t>& t : {std::optional(r.created), r.deleted, r.scheduled}) {
    if (t && *t > kMaxTraceSeconds) {
      return rows.error("time " + std::to_string(*t) + " s is above " + secondsLimitText());
    }
  }
  if (r.scheduled && *r.scheduled < r.created) {
    return rows.error("scheduled_time before creation_time");
  }
  if (r.scheduled && r.deleted && *r.deleted < *r.scheduled) {
    return rows.error("negative duration (deletion_time before scheduled_time)");
  }
  return r;
}

// One pod-list row: a job appended to `out`, or a skip counted there.
Status addPodRow(const CsvRows& rows, const AlibabaOptions& options, SpecInterner& specs,
                 LoadedTrace& out) {
  const std::string_view name = rows.field("name");
  if (name.empty()) {
    return rows.error("name is empty");
  }
  auto r = parsePodRow(rows);
  if (!r) {
    return r.error();
  }
  const auto specCol = rows.header().find("gpu_spec");
  const std::string_view spec = specCol ? rows.field(*specCol) : std::string_view{};
  const auto specIndex = specs.intern(spec);
  if (!specIndex) {
    return rows.error("gpu_spec is not GPU model names joined by '|': " + quoteInput(spec));
  }
  TraceStats& stats = out.stats;
  if (r->gpus == 0 && !options.includeCpuOnly) {
    ++stats.skippedCpuOnly;
    return okStatus();
  }
  if (!r->scheduled || !r->deleted) {
    ++(r->scheduled ? stats.skippedNoEndTime : stats.skippedNoStartTime);
    return okStatus();
  }
  const auto phaseCol = rows.header().find("pod_phase");
  const bool censored = phaseCol && rows.field(*phaseCol) == "Running";
  if (censored && options.skipCensored) {
    ++stats.skippedCensored;
    return okStatus();
  }
  if (r->gpus >= 1 && r->gpuMilli < 1000) {  // GPU sharing
    if (options.sharing == GpuSharing::Skip) {
      ++stats.skippedGpuSharing;
      return okStatus();
    }
    ++stats.gpuSharingAsWhole;
  }
  stats.censoredRunning += censored ? 1 : 0;
  Job job;
  job.id = std::string(name);
  job.arrival = r->created * kMsPerSecond;
  job.duration = (*r->deleted - *r->scheduled) * kMsPerSecond;
  job.gpus = static_cast<std::uint32_t>(r->gpus);
  job.cpuMilli = r->cpu;
  job.memoryMib = r->mem;
  if (job.gpus > 0 && *specIndex != 0) {  // a CPU-only task needs no GPU model
    job.gpuSpec = *specIndex;
    ++stats.gpuSpecConstrained;
  }
  stats.zeroDuration += job.duration == 0 ? 1 : 0;
  out.trace.jobs.push_back(std::move(job));
  ++stats.jobs;
  return okStatus();
}

// Runs `row` on each data row of `rows` until the input ends or `row` fails.
template <typename Row>
Status forEachRow(CsvRows& rows, Row&& row) {
  while (true) {
    auto more = rows.next();
    if (!more) {
      return more.error();
    }
    if (!*more) {
      return okStatus();
    }
    if (auto s = row(); !s) {
      return s;
    }
  }
}

// One node-list row.
Result<NodeSpec> nodeRow(const CsvRows& rows) {
  NodeSpec n;
  n.name = std::string(rows.field("sn"));
  if (n.name.empty()) {
    return rows.error("sn is empty");
  }
  std::int64_t vals[3] = {};
  const char* cols[3] = {"cpu_milli", "memory_mib", "gpu"};
  for (int i = 0; i < 3; ++i) {
    auto v = parseInt(rows.field(cols[i]));
    if (!v || *v < 0) {
      return rows.error(std::string(cols[i]) + " is not a non-negative integer");
    }
    vals[i] = *v;
  }
  if (vals[2] > 1024) {
    return rows.error("gpu out of range (0..1024)");
  }
  if (const auto modelCol = rows.header().find("model")) {
    // The published list writes an empty model (pandas: nan) for GPU-less nodes.
    std::string_view model = rows.field(*modelCol);
    model = isNan(model) ? std::string_view{} : model;
    if (!model.empty() && !alloc::validGpuModelName(model)) {
      return rows.error("model is not a GPU model name: " + quoteInput(model));
    }
    n.model = std::string(model);
  }
  n.cpuMilli = vals[0];
  n.memoryMib = vals[1];
  n.gpus = static_cast<std::uint32_t>(vals[2]);
  return n;
}

// A time column of the generic CSV: decimal seconds, 0..kMaxTraceSeconds, into `dst` (ms).
Status csvTime(const CsvRows& rows, const char* col, SimMs& dst) {
  const std::string_view f = rows.field(col);
  if (!f.empty() && f.front() == '-') {
    return rows.error(std::string(col) + " is negative: " + quoteInput(f));
  }
  bool tooLarge = false;
  auto v = parseSecondsMs(f, &tooLarge);
  if (tooLarge) {
    // A number: shown as it is when short, quoted and cut when long.
    const std::string shown = f.size() <= kMaxQuotedChars ? std::string(f) : quoteInput(f);
    return rows.error(std::string(col) + " " + shown + " is above " + secondsLimitText());
  }
  if (!v) {
    return rows.error(std::string(col) +
                      " is not a number of seconds (>= 0, at most 3 decimals): " + quoteInput(f));
  }
  dst = *v;
  return okStatus();
}

// The optional gang columns of a generic-CSV row (issue 27): members (1..kMaxMembers; each
// member requests the row's gpus, cpu and memory_mib) and priority (a 32-bit integer, as
// spec.priority). An empty field is the default (1 member, priority 0).
Status gangColumns(const CsvRows& rows, Job& job) {
  const Header& h = rows.header();
  if (const auto col = h.find("members")) {
    const std::string_view f = rows.field(*col);
    auto m = parseInt(f);
    if (!f.empty() && (!m || *m < 1 || *m > kMaxMembers)) {
      return rows.error("members is not an integer in 1.." + std::to_string(kMaxMembers) + ": " +
                        quoteInput(f));
    }
    job.members = f.empty() ? 1 : static_cast<std::uint32_t>(*m);
  }
  if (const auto col = h.find("priority")) {
    const std::string_view f = rows.field(*col);
    auto p = parseInt(f);
    if (!f.empty() && (!p || *p < std::numeric_limits<std::int32_t>::min() ||
                       *p > std::numeric_limits<std::int32_t>::max())) {
      return rows.error("priority is not an integer in -2147483648..2147483647: " + quoteInput(f));
    }
    job.priority = f.empty() ? 0 : static_cast<std::int32_t>(*p);
  }
  return okStatus();
}

// One generic-CSV row: a job appended to `out`.
Status addJobRow(const CsvRows& rows, SpecInterner& specs, LoadedTrace& out) {
  const Header& h = rows.header();
  Job job;
  const auto idCol = h.find("id");
  job.id = idCol ? std::string(rows.field(*idCol)) : "job-" + std::to_string(out.stats.rows);
  if (auto s = csvTime(rows, "arrival_s", job.arrival); !s) {
    return s;
  }
  if (auto s = csvTime(rows, "duration_s", job.duration); !s) {
    return s;
  }
  const std::string_view g = rows.field("gpus");
  auto gv = parseInt(g);
  if (!gv || *gv < 0 || *gv > 1024) {
    return rows.error("gpus is not an integer in 0..1024: " + quoteInput(g));
  }
  job.gpus = static_cast<std::uint32_t>(*gv);
  if (const auto cpuCol = h.find("cpu")) {
    auto c = parseCoresMilli(rows.field(*cpuCol));
    if (!c) {
      return rows.error("cpu is not a non-negative number of cores: " +
                        quoteInput(rows.field(*cpuCol)));
    }
    job.cpuMilli = *c;
  }
  if (const auto memCol = h.find("memory_mib")) {
    auto m = parseInt(rows.field(*memCol));
    if (!m || *m < 0) {
      return rows.error("memory_mib is not a non-negative integer: " +
                        quoteInput(rows.field(*memCol)));
    }
    job.memoryMib = *m;
  }
  if (const auto specCol = h.find("gpu_spec")) {
    const std::string_view spec = rows.field(*specCol);
    const auto specIndex = specs.intern(spec);
    if (!specIndex) {
      return rows.error("gpu_spec is not GPU model names joined by '|': " + quoteInput(spec));
    }
    if (*specIndex != 0 && job.gpus > 0) {
      job.gpuSpec = *specIndex;
      ++out.stats.gpuSpecConstrained;
    }
  }
  if (auto st = gangColumns(rows, job); !st) {
    return st;
  }
  out.stats.zeroDuration += job.duration == 0 ? 1 : 0;
  out.trace.jobs.push_back(std::move(job));
  ++out.stats.jobs;
  return okStatus();
}

// The rows of a job trace, each added by `add`, at most kMaxJobs; sorted by arrival after.
template <class Add>
Result<LoadedTrace> readJobRows(CsvRows& rows, const std::string& source, Add add) {
  LoadedTrace out;
  SpecInterner specs(out.trace);
  auto read = forEachRow(rows, [&]() -> Status {
    if (out.stats.rows >= kMaxJobs) {
      return tooManyRows(source, rows.lineNo());
    }
    ++out.stats.rows;
    return add(specs, out);
  });
  if (!read) {
    return read.error();
  }
  sortByArrival(out.trace);
  return out;
}

}  // namespace

Result<LoadedTrace> readAlibabaPods(std::istream& in, const std::string& source,
                                    const AlibabaOptions& options) {
  CsvRows rows(in, source);
  if (auto s = rows.readHeader({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                "creation_time", "deletion_time", "scheduled_time"},
                               {}, true);
      !s) {
    return s.error();
  }
  return readJobRows(rows, source, [&](SpecInterner& specs, LoadedTrace& out) {
    return addPodRow(rows, options, specs, out);
  });
}

Result<LoadedTrace> readAlibabaPodsFile(const std::string& path, const AlibabaOptions& options) {
  return withFile(path, [&](std::istream& in) { return readAlibabaPods(in, path, options); });
}

Result<std::vector<NodeSpec>> readAlibabaNodes(std::istream& in, const std::string& source) {
  CsvRows rows(in, source);
  if (auto s = rows.readHeader({"sn", "cpu_milli", "memory_mib", "gpu"}, {}, true); !s) {
    return s.error();
  }
  std::vector<NodeSpec> nodes;
  std::uint64_t gpuTotal = 0;
  auto read = forEachRow(rows, [&]() -> Status {
    auto n = nodeRow(rows);
    if (!n) {
      return n.error();
    }
    if (nodes.size() >= kMaxNodes) {
      return rows.error("more than " + std::to_string(kMaxNodes) + " nodes (the limit)");
    }
    gpuTotal += n->gpus;
    if (gpuTotal > kMaxGpus) {
      return rows.error("more than " + std::to_string(kMaxGpus) + " GPUs (the limit)");
    }
    nodes.push_back(std::move(*n));
    return okStatus();
  });
  if (!read) {
    return read.error();
  }
  return nodes;
}

Result<std::vector<NodeSpec>> readAlibabaNodesFile(const std::string& path) {
  return withFile(path, [&](std::istream& in) { return readAlibabaNodes(in, path); });
}

Result<LoadedTrace> readJobCsv(std::istream& in, const std::string& source) {
  CsvRows rows(in, source);
  if (auto s =
          rows.readHeader({"arrival_s", "duration_s", "gpus"},
                          {"id", "cpu", "memory_mib", "gpu_spec", "members", "priority"}, false);
      !s) {
    return s.error();
  }
  return readJobRows(rows, source, [&](SpecInterner& specs, LoadedTrace& out) {
    return addJobRow(rows, specs, out);
  });
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
  // members and priority likewise only when some job is a gang or has a priority.
  const bool gangs = std::any_of(trace.jobs.begin(), trace.jobs.end(),
                                 [](const Job& j) { return j.members != 1 || j.priority != 0; });
  out << "id,arrival_s,duration_s,gpus,cpu,memory_mib" << (specs ? ",gpu_spec" : "")
      << (gangs ? ",members,priority\n" : "\n");
  for (const Job& j : trace.jobs) {
    out << j.id << ',' << formatMs(j.arrival) << ',' << formatMs(j.duration) << ',' << j.gpus << ','
        << formatMs(j.cpuMilli) << ',' << j.memoryMib;
    if (specs) {
      out << ',' << trace.specOf(j);
    }
    if (gangs) {
      out << ',' << j.members << ',' << j.priority;
    }
    out << '\n';
  }
}

}  // namespace kc::sim
