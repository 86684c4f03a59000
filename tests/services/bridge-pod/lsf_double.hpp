#pragma once
// TEST DOUBLE of IBM Spectrum LSF Application Center's web services (the `ws/` API, as the
// original bridge and IBM's docs use it) with their quirks: XML logon answered with a JSON
// token that embeds its expiry between '"' characters, the token sent back as the cookie
// platform_token with '"' written #quote#, multipart/mixed submit with a nested `data` part
// of <AppParam> items and file parts named by Content-ID, job replies shaped like XML turned
// into JSON ({"@total": "1", "job": {...}} - an object for one job, an array for several -
// every value a string, times "YYYY-MM-DD HH:MM:SS"), bkill through ws/userCmd, files
// downloaded with the name as the GET body and returned as multipart. File parameters
// (<type>file</type>, value "<name>,upload") must each name a file part and every file part
// must be named by one (400 otherwise). Jobs really run (LocalJob): COMMANDTORUN under /bin/sh
// in the job's directory with the uploaded files. Like LSF (CLEAN_PERIOD), the double can
// forget finished jobs (forgetFinishedAfter): ws/jobs then answers @total 0 for them, and
// ws/jobhistory?ids= answers XML <jobHistory><history><content> with bhist -l style text
// (events "Done successfully.", "Exited with exit code N.", "Signal <KILL> requested ...",
// "Completed <exit>", wrapped at 80 columns, continuation lines indented by 21 spaces, even
// inside words); forgetHistory(id) makes the history forget a job too. Sessions: every logon
// opens one, GET webservice/pacclient/logout/ with its cookie closes it (answer 200 text
// "ok", as pacclient expects; the token is refused from then on). openSessions() counts the
// logons never logged out (expired or not: a test may outlive a token), liveSessions() those
// whose token is still valid too.

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "services/bridge-pod/multipart.hpp"
#include "tests/services/bridge-pod/local_jobs.hpp"

namespace kc::bridge::testing {

class LsfDouble {
 public:
  LsfDouble(std::string dir, std::string user, std::string password,
            std::chrono::seconds tokenLifetime)
      : dir_(std::move(dir)),
        user_(std::move(user)),
        password_(std::move(password)),
        tokenLifetime_(tokenLifetime) {
    listener_.up();
  }
  ~LsfDouble() { listener_.down(); }

  std::string url() const { return listener_.base() + "/platform/"; }
  void down() { listener_.down(); }
  void up() { listener_.up(); }

  std::size_t submissions() {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  int logons() {
    std::lock_guard lock(mu_);
    return logons_;
  }
  int expiredCalls() {
    std::lock_guard lock(mu_);
    return expired_;
  }
  int logouts() {
    std::lock_guard lock(mu_);
    return logouts_;
  }
  // Logouts answered 500 from now on (the token stays valid): a logout that fails.
  void failLogouts() {
    std::lock_guard lock(mu_);
    failLogouts_ = true;
  }
  int openSessions() {
    std::lock_guard lock(mu_);
    return logons_ - logouts_;
  }
  std::size_t liveSessions() {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::system_clock::now();
    return static_cast<std::size_t>(std::count_if(tokens_.begin(), tokens_.end(),
                                                  [&](const auto& t) { return now < t.second; }));
  }
  std::map<std::string, std::string> params(const std::string& id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id).params;
  }
  // Finished jobs older than `after` are no longer listed by ws/jobs (nullopt: never).
  void forgetFinishedAfter(std::optional<std::chrono::milliseconds> after) {
    std::lock_guard lock(mu_);
    forgetAfter_ = after;
  }
  void forgetHistory(const std::string& id) {
    std::lock_guard lock(mu_);
    jobs_.at(id).inHistory = false;
  }
  // bkill by an administrator, not by the bridge pod.
  void adminKill(const std::string& id) {
    std::lock_guard lock(mu_);
    if (jobs_.at(id).job->running()) {
      jobs_.at(id).killedBy = "lsfadmin";
    }
    jobs_.at(id).job->kill();
  }
  int historyCalls() {
    std::lock_guard lock(mu_);
    return historyCalls_;
  }
  std::map<std::string, std::string> files(const std::string& id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id).files;
  }
  std::shared_ptr<LocalJob> job(const std::string& id) {
    std::lock_guard lock(mu_);
    return jobs_.at(id).job;
  }

 private:
  struct Entry {
    std::map<std::string, std::string> params;
    std::map<std::string, std::string> files;  // uploaded with the submit, by name
    std::string killedBy;                      // who requested a KILL signal
    bool inHistory = true;
    std::shared_ptr<LocalJob> job;
    std::chrono::system_clock::time_point submitted;
  };

  static kc::net::Response xml(unsigned status, const std::string& body) {
    kc::net::Response r;
    r.status = status;
    r.body = body;
    r.withHeader("Content-Type", "application/xml");
    return r;
  }
  static std::string between(const std::string& s, const std::string& open,
                             const std::string& close) {
    const auto a = s.find(open);
    if (a == std::string::npos) {
      return {};
    }
    const auto b = s.find(close, a + open.size());
    return b == std::string::npos ? std::string() : s.substr(a + open.size(), b - a - open.size());
  }
  static std::string unescape(std::string s) {
    for (const auto& [e, c] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}}) {
      for (auto p = s.find(e); p != std::string::npos; p = s.find(e, p + c.size())) {
        s.replace(p, e.size(), c);
      }
    }
    return s;
  }
  static std::string utcTime(std::chrono::system_clock::time_point t, const char* format) {
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    ::gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
  }
  static std::string lsfTime(std::chrono::system_clock::time_point t) {
    return utcTime(t, "%Y-%m-%d %H:%M:%S");
  }
  static std::string bhistTime(std::chrono::system_clock::time_point t) {
    return utcTime(t, "%a %b %d %H:%M:%S");
  }

  kc::net::Response logon(const kc::net::Request& r) {
    if (r.header("Content-Type").value_or("").find("application/xml") != 0) {
      return xml(400, "<error>Content-Type must be application/xml</error>");
    }
    if (unescape(between(r.body, "<name>", "</name>")) != user_ ||
        unescape(between(r.body, "<pass>", "</pass>")) != password_) {
      return xml(403, "<error>Log on failed: wrong user name or password</error>");
    }
    if (r.header("Accept").value_or("").find("application/json") == std::string::npos) {
      return xml(200, "<token>only JSON in this double</token>");
    }
    std::lock_guard lock(mu_);
    ++logons_;
    const auto expiry = std::chrono::system_clock::now() + tokenLifetime_;
    const std::string token =
        user_ + "\"" + kc::formatRfc3339(expiry) + "\"" + std::to_string(logons_) + "a7f3e";
    tokens_[token] = expiry;
    return kc::net::Response::json(200, {{"token", token}});
  }

  // The token in the request's platform_token cookie, '#quote#' undone (empty without one).
  static std::string cookieToken(const kc::net::Request& r) {
    std::string cookie = r.header("Cookie").value_or("");
    const auto at = cookie.find("platform_token=");
    if (at == std::string::npos) {
      return {};
    }
    std::string token = cookie.substr(at + 15);
    token = token.substr(0, token.find(';'));
    for (auto p = token.find("#quote#"); p != std::string::npos; p = token.find("#quote#", p + 1)) {
      token.replace(p, 7, "\"");
    }
    return token;
  }

  // nullopt when the cookie holds a live token.
  std::optional<kc::net::Response> auth(const kc::net::Request& r) {  // with mu_ held
    const std::string token = cookieToken(r);
    if (token.empty()) {
      return xml(403, "<error>You must log on first</error>");
    }
    auto it = tokens_.find(token);
    if (it == tokens_.end()) {
      return xml(403, "<error>Invalid token</error>");
    }
    if (std::chrono::system_clock::now() >= it->second) {
      ++expired_;
      return xml(403, "<error>Token expired</error>");
    }
    return std::nullopt;
  }

  kc::net::Response logout(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    if (failLogouts_) {
      return xml(500, "<error>logout failed in this double</error>");
    }
    tokens_.erase(cookieToken(r));
    ++logouts_;
    kc::net::Response out;
    out.body = "ok";
    out.withHeader("Content-Type", "text/plain");
    return out;
  }

  kc::net::Response submit(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    auto boundary = kc::bridge::pod::multipartBoundary(r.header("Content-Type").value_or(""));
    if (!boundary.ok() || r.header("Content-Type")->rfind("multipart/mixed", 0) != 0) {
      return xml(400, "<error>multipart/mixed expected</error>");
    }
    auto parts = kc::bridge::pod::parseMultipart(r.body, *boundary);
    if (!parts.ok()) {
      return xml(400, "<error>" + parts.error().message + "</error>");
    }
    std::map<std::string, std::string> params, files,
        fileParams;  // fileParams: file name -> action
    std::string app;
    for (const auto& p : *parts) {
      const std::string id = p.header("Content-ID");
      if (id == "<AppName>") {
        app = p.body;
      } else if (id == "<data>") {
        auto inner = kc::bridge::pod::multipartBoundary(p.header("Content-Type"));
        auto items = inner.ok() ? kc::bridge::pod::parseMultipart(p.body, *inner)
                                : kc::Result<std::vector<kc::bridge::pod::MimePart>>(inner.error());
        if (!items.ok()) {
          return xml(400, "<error>data part: " + items.error().message + "</error>");
        }
        for (const auto& item : *items) {
          const std::string value = unescape(between(item.body, "<value>", "</value>"));
          params[unescape(between(item.body, "<id>", "</id>"))] = value;
          if (between(item.body, "<type>", "</type>") == "file") {
            // A file parameter: "<name>,<action>"; the file is the part with Content-ID <name>.
            const auto comma = value.rfind(',');
            if (comma == std::string::npos || comma == 0) {
              return xml(400,
                         "<error>file parameter value " + value + " is not name,action</error>");
            }
            fileParams[value.substr(0, comma)] = value.substr(comma + 1);
          }
        }
      } else if (id.size() > 2) {
        files[id.substr(1, id.size() - 2)] = p.body;
      }
    }
    if (app != "generic") {
      return xml(400, "<error>Application " + app + " does not exist</error>");
    }
    for (const auto& [name, action] : fileParams) {
      if (action != "upload" || !files.count(name)) {
        return xml(400, "<error>file parameter " + name + "," + action +
                            ": no such uploaded file</error>");
      }
    }
    for (const auto& [name, bytes] : files) {
      if (!fileParams.count(name)) {
        return xml(400, "<error>file part " + name + " is not named by a file parameter</error>");
      }
      if (name.find('/') != std::string::npos || name == ".." || name == ".") {
        return xml(400, "<error>file name " + name + " is not a plain name</error>");
      }
    }
    if (params["COMMANDTORUN"].empty()) {
      return xml(400, "<error>COMMANDTORUN is required</error>");
    }
    const std::string id = std::to_string(101 + jobs_.size());
    const std::string jobDir = dir_ + "/" + id;
    std::filesystem::create_directories(jobDir);
    for (const auto& [name, bytes] : files) {
      std::ofstream(jobDir + "/" + name, std::ios::binary) << bytes;
    }
    std::string command = params["COMMANDTORUN"];
    if (!params["OUTPUT_FILE"].empty()) {
      command = "(" + command + ") >" + params["OUTPUT_FILE"];
    }
    Entry e;
    e.params = params;
    e.files = files;
    e.submitted = std::chrono::system_clock::now();
    e.job =
        std::make_shared<LocalJob>(jobDir, command, std::vector<std::string>{"LSB_JOBID=" + id});
    jobs_.emplace(id, std::move(e));
    return kc::net::Response::json(200, {{"id", id}});
  }

  nlohmann::json view(const std::string& id, Entry& e) const {
    std::string status = "RUN";
    const auto exit = e.job->exitStatus();
    if (std::chrono::system_clock::now() - e.submitted < std::chrono::milliseconds(300) && !exit) {
      status = "PEND";
    } else if (exit) {
      status = *exit == 0 ? "DONE" : "EXIT";
    }
    nlohmann::json j{{"id", id},
                     {"name", e.params["JOB_NAME"]},
                     {"jobStatus", status},
                     {"queue", e.params.count("QUEUE") ? e.params["QUEUE"] : "normal"},
                     {"submitTime", lsfTime(e.submitted)},
                     {"startTime", status == "PEND" ? "-" : lsfTime(e.job->started())},
                     {"endTime", "-"},
                     {"cwd", dir_ + "/" + id}};
    if (auto end = e.job->ended()) {
      j["endTime"] = lsfTime(*end);
      j["exitCode"] = std::to_string(*exit);
    }
    return j;
  }

  bool forgotten(Entry& e) const {  // with mu_ held
    const auto end = e.job->ended();
    return forgetAfter_ && end && std::chrono::system_clock::now() - *end >= *forgetAfter_;
  }

  // bhist -l's layout: lines of at most 80 columns, continuations indented by 21 spaces.
  static std::string wrap(const std::string& line) {
    std::string out = line.substr(0, 80);
    for (std::size_t at = 80; at < line.size(); at += 59) {
      out += "\n" + std::string(21, ' ') + line.substr(at, 59);
    }
    return out + "\n";
  }

  std::string bhist(const std::string& id, Entry& e) const {
    std::string text =
        wrap("Job <" + id + ">, Job Name <" + e.params["JOB_NAME"] + ">, User <" + user_ +
             ">, Project <default>, Command <" + e.params["COMMANDTORUN"] + ">");
    text +=
        wrap(bhistTime(e.submitted) + ": Submitted from host <lsfhost>, to Queue <normal>, CWD <" +
             dir_ + "/" + id + ">;");
    text +=
        wrap(bhistTime(e.job->started()) +
             ": Dispatched 1 Task(s) on Host(s) <lsfhost>, Allocated 1 Slot(s) "
             "on Host(s) <lsfhost>, Effective RES_REQ <select[type == local] order[r15s:pg] >;");
    const auto exit = e.job->exitStatus();
    const auto end = e.job->ended();
    if (!exit || !end) {
      return text;
    }
    const std::string at = bhistTime(*end) + ": ";
    if (!e.killedBy.empty()) {
      text += wrap(at + "Signal <KILL> requested by user or administrator <" + e.killedBy + ">;");
      text += wrap(at + "Exited by LSF signal TERM_OWNER. The CPU time used is 0.0 seconds;");
      text += wrap(at + "Completed <exit>; TERM_OWNER: job killed by owner.");
    } else if (*exit == 0) {
      text += wrap(at + "Done successfully. The CPU time used is 0.0 seconds;");
    } else {
      text += wrap(at + "Exited with exit code " + std::to_string(*exit) +
                   ". The CPU time used is 0.0 seconds;");
      text += wrap(at + "Completed <exit>.");
    }
    return text;
  }

  kc::net::Response history(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    ++historyCalls_;
    std::string ids;
    for (const auto& [k, v] : r.query) {
      if (k == "ids") {
        ids = v;
      }
    }
    std::string body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<jobHistory>";
    auto it = jobs_.find(ids);
    if (it != jobs_.end() && it->second.inHistory) {
      body += "<history><content>" + kc::bridge::pod::xmlEscape(bhist(it->first, it->second)) +
              "</content><timeSummary><timeOfCalculation>" +
              bhistTime(std::chrono::system_clock::now()) +
              "</timeOfCalculation></timeSummary></history>";
    }
    return xml(200, body + "</jobHistory>");
  }

  kc::net::Response jobs(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    std::string rest = r.path.substr(std::string("/platform/ws/jobs").size());
    nlohmann::json list = nlohmann::json::array();
    if (rest.empty()) {
      std::string name;
      for (const auto& [k, v] : r.query) {
        if (k == "name") {
          name = v;
        }
      }
      for (auto& [id, e] : jobs_) {
        if ((name.empty() || e.params["JOB_NAME"] == name) && !forgotten(e)) {
          list.push_back(view(id, e));
        }
      }
    } else {
      auto it = jobs_.find(rest.substr(1));
      if (it != jobs_.end() && !forgotten(it->second)) {
        list.push_back(view(it->first, it->second));
      }
    }
    nlohmann::json reply{{"@total", std::to_string(list.size())}};
    if (list.size() == 1) {
      reply["job"] = list[0];  // one element: an object, as the XML-to-JSON conversion does
    } else if (!list.empty()) {
      reply["job"] = list;
    }
    return kc::net::Response::json(200, reply);
  }

  kc::net::Response userCmd(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    const std::string cmd = between(r.body, "<cmd>", "</cmd>");
    if (cmd.rfind("bkill ", 0) != 0) {
      return xml(400, "<error>only bkill in this double</error>");
    }
    auto it = jobs_.find(cmd.substr(6));
    if (it == jobs_.end()) {
      return kc::net::Response::json(
          200, {{"code", "255"}, {"message", cmd.substr(6) + ": No matching job found"}});
    }
    if (it->second.job->running()) {
      it->second.killedBy = user_;
    }
    it->second.job->kill();
    return kc::net::Response::json(
        200, {{"code", "0"}, {"message", "Job <" + it->first + "> is being terminated"}});
  }

  kc::net::Response file(const kc::net::Request& r) {
    std::lock_guard lock(mu_);
    if (auto denied = auth(r)) {
      return *denied;
    }
    auto it = jobs_.find(r.path.substr(std::string("/platform/webservice/pacclient/file/").size()));
    if (it == jobs_.end()) {
      return xml(404, "<error>no such job</error>");
    }
    const std::string name = r.body;
    const std::string content = it->second.job->file(name);
    if (name.empty() || name.find("..") != std::string::npos || content == "<absent>") {
      return xml(404, "<error>File " + name + " does not exist</error>");
    }
    kc::bridge::pod::MimePart part;
    part.headers = {{"Content-Type", "application/octet-stream"}, {"Content-ID", "<" + name + ">"}};
    part.body = content;
    const std::string b = "lsf-double-boundary";
    kc::net::Response out;
    out.body = kc::bridge::pod::buildMultipart(b, {part});
    out.withHeader("Content-Type", "multipart/mixed; boundary=" + b);
    return out;
  }

  std::string dir_, user_, password_;
  std::chrono::seconds tokenLifetime_;
  std::mutex mu_;
  std::map<std::string, Entry> jobs_;
  std::map<std::string, std::chrono::system_clock::time_point> tokens_;
  int logons_ = 0;
  int expired_ = 0;
  int logouts_ = 0;
  bool failLogouts_ = false;
  int historyCalls_ = 0;
  std::optional<std::chrono::milliseconds> forgetAfter_;
  RestartableServer listener_{[this](kc::net::HttpServer& s) {
    s.route("POST", "/platform/ws/logon", [this](const kc::net::Request& r) { return logon(r); });
    s.route("POST", "/platform/ws/jobs/submit",
            [this](const kc::net::Request& r) { return submit(r); });
    s.route("POST", "/platform/ws/userCmd",
            [this](const kc::net::Request& r) { return userCmd(r); });
    s.routePrefix("GET", "/platform/ws/jobs",
                  [this](const kc::net::Request& r) { return jobs(r); });
    s.route("GET", "/platform/ws/jobhistory",
            [this](const kc::net::Request& r) { return history(r); });
    s.route("GET", "/platform/webservice/pacclient/logout/",
            [this](const kc::net::Request& r) { return logout(r); });
    s.routePrefix("GET", "/platform/webservice/pacclient/file/",
                  [this](const kc::net::Request& r) { return file(r); });
  }};
};

}  // namespace kc::bridge::testing
