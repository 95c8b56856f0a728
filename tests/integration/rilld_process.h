#pragma once
// Runs the real rilld as a child process on a temporary data directory and a port the kernel picks, and finds the
// bound address in <data>/runtime/current_config.toml (or, where a full disk kept rilld from writing it, in its
// "rilld: serving ADDR" line: then http_address() is empty).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifndef RILLD_PATH
#error "RILLD_PATH must name the rilld binary"
#endif

namespace rill::testing {

class temp_data_dir {
 public:
  temp_data_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rill-it-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~temp_data_dir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class rilld_process {
 public:
  rilld_process(std::string data_dir, std::vector<std::string> extra = {}, std::string tcp = "127.0.0.1:0",
                std::string http = "127.0.0.1:0")
      : data_dir_(std::move(data_dir)), extra_(std::move(extra)), tcp_(std::move(tcp)), http_(std::move(http)) {}
  ~rilld_process() {
    if (pid_ > 0) {
      kill_hard();
    }
  }

  // Starts rilld and waits until it serves; returns "host:port" or nullopt (with its output in `log()`).
  // `timeout` only keeps a test from hanging on a server that never comes up.
  std::optional<std::string> start(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const std::string config = data_dir_ + "/runtime/current_config.toml";
    std::filesystem::remove(config);
    if (log_path_.empty()) {
      log_path_ = data_dir_ + ".log";
    }
    const std::size_t log_before = log().size();  // the log is appended to: earlier starts' lines do not count
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<std::string> args = {RILLD_PATH,
                                       "--data-dir",
                                       data_dir_,
                                       "--tcp",
                                       tcp_,
                                       "--http",
                                       http_,
                                       "--set",
                                       "runtime.cpu_allocation=2",
                                       "--set",
                                       "runtime.pin_cores=false"};
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) {
        argv.push_back(a.data());
      }
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(config);
      std::string line;
      std::string tcp;
      std::string http;
      while (std::getline(in, line)) {
        // toml++ writes strings as 'literal' or "basic" strings.
        if (line.rfind("tcp_address = ", 0) == 0 && line.size() > 16) {
          tcp = line.substr(15, line.size() - 16);
        } else if (line.rfind("http_address = ", 0) == 0 && line.size() > 17) {
          http = line.substr(16, line.size() - 17);
        }
      }
      if (tcp.empty()) {
        const std::string out = log();
        constexpr std::string_view serving = "rilld: serving ";
        if (const auto at = out.find(serving, log_before); at != std::string::npos) {
          const auto end = out.find(' ', at + serving.size());
          tcp = out.substr(at + serving.size(), end - at - serving.size());
        }
      }
      if (!tcp.empty()) {
        address_ = tcp;
        http_address_ = http;
        return address_;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

  // SIGTERM and wait: the graceful stop. Returns the exit code (or -1).
  int stop() {
    if (pid_ <= 0) {
      return -1;
    }
    ::kill(pid_, SIGTERM);
    ::kill(pid_, SIGCONT);  // a paused process would hold SIGTERM pending forever
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void kill_hard() {
    if (pid_ <= 0) {
      return;
    }
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // SIGSTOP, returning once every thread has stopped (a group stop is reported to the parent only when complete;
  // kill() alone returns while threads may still run, and answer one more request).
  // Returns false (and records the exit) where the process had already ended.
  bool pause() {
    if (pid_ <= 0) {
      return false;
    }
    ::kill(pid_, SIGSTOP);
    int status = 0;
    while (::waitpid(pid_, &status, WUNTRACED) < 0 && errno == EINTR) {
    }
    if (!WIFSTOPPED(status)) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
  }
  void resume() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
    }
  }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  const std::string& address() const { return address_; }
  // Where rilld's output goes (default: the data directory's path with ".log"); set before start(). Two processes
  // on one data directory need distinct logs: start() reads the address from this log where the address file is
  // missing.
  void set_log_path(std::string path) { log_path_ = std::move(path); }
  // The monitoring listener's "host:port" (rilld binds it on a port the kernel picks).
  const std::string& http_address() const { return http_address_; }
  pid_t pid() const { return pid_; }
  std::optional<int> exit_status() const { return exit_status_; }

 private:
  std::string data_dir_;
  std::vector<std::string> extra_;
  std::string tcp_;
  std::string http_;
  std::string log_path_;
  std::string address_;
  std::string http_address_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

}  // namespace rill::testing
