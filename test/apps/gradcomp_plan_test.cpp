// SPDX-License-Identifier: Apache-2.0
// Tests of the gradcomp-plan tool: runs the real binary on the shipped profiles and on
// generated ones, and checks its JSON against the library, its text output, its SVG, and its
// exit status and single stderr line for bad command lines and bad profiles.
#include <gradcomp/schedule.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "tool_runner.hpp"

#ifndef GRADCOMP_PLAN_EXE
#error "GRADCOMP_PLAN_EXE must be the path of the gradcomp-plan binary"
#endif
#ifndef GRADCOMP_PROFILE_DIR
#error "GRADCOMP_PROFILE_DIR must name the directory of the shipped profiles"
#endif

namespace {

namespace fs = std::filesystem;
namespace gs = gradcomp::schedule;

const std::string error_prefix = "gradcomp-plan: error: ";

using gradcomp_tool_tests::read_bytes;
using gradcomp_tool_tests::run_result;

std::string shipped(const std::string& name) {
  return std::string(GRADCOMP_PROFILE_DIR) + "/" + name + ".csv";
}

//! A fresh directory for one test, removed at its end; runs the tool with stdout and stderr
//! captured to files in it.
class scratch : public gradcomp_tool_tests::scratch_dir {
public:
  scratch() : scratch_dir("gradcomp-plan-scratch") {}

  [[nodiscard]] std::string path(const std::string& name) const { return (root() / name).string(); }

  //! Writes `text` as file `name` and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    gradcomp_tool_tests::write_bytes(root() / name, text);
    return path(name);
  }

  [[nodiscard]] run_result run(const std::vector<std::string>& args) const {
    return run_tool(GRADCOMP_PLAN_EXE, args);
  }
};

//! The tool's arguments for `profile` at 10 Gbit/s with alpha 50 us, plus `extra`.
std::vector<std::string> args_for(const std::string& profile,
                                  const std::string& forward,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"--profile", profile, "--forward-seconds", forward, "--alpha", "5e-5",
                             "--beta",    "8e-10"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

//! Checks that `r` is a clean bad-input exit: status 2, nothing on stdout, one stderr line
//! starting with the tool's prefix and containing `fragment`.
void check_bad_input(const run_result& r, const std::string& fragment) {
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind(error_prefix, 0) == 0);
  CHECK(r.err.find(fragment) != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1); // exactly one line
}

const std::string counterexample_csv = "name,numel,backward_seconds\n"
                                       "L-2,10,10\n"
                                       "L-1,1,3\n"
                                       "L,7,1\n";

} // namespace

TEST_CASE("JSON output matches the library on the shipped ResNet-50 profile", "[plan]") {
  const scratch s;
  const run_result r = s.run(args_for(shipped("resnet50"), "0.2015", {"--json"}));
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 1);
  const nlohmann::json& strategies = j.at("strategies");
  REQUIRE(strategies.size() == gs::all_strategies.size());

  std::ifstream in(shipped("resnet50"));
  const gs::layer_profile profile{gs::read_profile_csv(in, "resnet50"), 0.2015};
  REQUIRE(profile.size() == 161);
  const gs::cost_model model = gs::cost_model::affine(5e-5, 8e-10);
  const double best = strategies.at("optimal").at("t_iter").get<double>();
  for (const gs::strategy which : gs::all_strategies) {
    const std::string name(gs::name(which));
    INFO("strategy " << name);
    const nlohmann::json& entry = strategies.at(name);
    CHECK(entry.size() == 2);
    // the groups are the library's plan, names in backward order, every layer once
    const gs::grouping g = gs::plan(which, profile, model);
    const auto& groups = entry.at("groups");
    REQUIRE(groups.size() == g.size());
    for (std::size_t k = 0; k < g.size(); ++k) {
      REQUIRE(groups[k].size() == g[k].size());
      for (std::size_t p = g[k].begin; p < g[k].end; ++p) {
        CHECK(groups[k][p - g[k].begin].get<std::string>() ==
              profile.layers[gs::forward_index(p, 161)].name);
      }
    }
    const double t = entry.at("t_iter").get<double>();
    CHECK(t == gs::t_iter_seconds(profile, model, g)); // printed with full precision
    CHECK(t >= best);
  }
  CHECK(strategies.at("per_layer").at("groups").size() == 161);
  CHECK(strategies.at("single").at("groups").size() == 1);
  CHECK(strategies.at("per_layer").at("groups")[0][0] == "fc.bias");
}

// docs/planner.md, "A counterexample to the greedy rules".
TEST_CASE("the greedy rules' counterexample through the tool", "[plan]") {
  const scratch s;
  const std::string csv = s.write("counterexample.csv", counterexample_csv);
  const run_result r = s.run(
      {"--profile", csv, "--forward-seconds", "0", "--alpha", "10", "--beta", "0.25", "--json"});
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out).at("strategies");
  CHECK(j.at("per_layer").at("t_iter") == 49.0);
  CHECK(j.at("single").at("t_iter") == 42.0);
  CHECK(j.at("dlgs_greedy").at("t_iter") == 42.0);
  CHECK(j.at("mgwfbp").at("t_iter") == 42.0);
  CHECK(j.at("optimal").at("t_iter") == 39.0);
  CHECK(j.at("two_segment").at("t_iter") == 39.0);
  CHECK(j.at("optimal").at("groups") == nlohmann::json::parse(R"([["L"], ["L-1", "L-2"]])"));
  CHECK(j.at("mgwfbp").at("groups") == nlohmann::json::parse(R"([["L", "L-1"], ["L-2"]])"));
  // the same as text: one block per strategy with its groups, then the summary
  const run_result text =
      s.run({"--profile", csv, "--forward-seconds", "0", "--alpha", "10", "--beta", "0.25"});
  REQUIRE(text.status == 0);
  CHECK(text.out.find("optimal: t_iter 39 s, 2 groups (backward order)\n  1: L\n  2: L-1 L-2\n") !=
        std::string::npos);
  CHECK(text.out.find("mgwfbp: t_iter 42 s, 2 groups") != std::string::npos);
  CHECK(text.out.find("summary") != std::string::npos);
}

TEST_CASE("compression, placement, density and bucket options reach the model", "[plan]") {
  const scratch s;
  // three layers, t_f 2 s, t_b [1, 2, 3], numel [10, 20, 30]; s = 0.5 + 0.01 m, T = 1 + 0.025 B
  const std::string csv =
      s.write("three.csv", "name,numel,backward_seconds\nl1,10,1\nl2,20,2\nl3,30,3\n");
  const std::vector<std::string> base{
      "--profile", csv,      "--forward-seconds", "2",       "--alpha", "1", "--beta",
      "0.025",     "--json", "--compress-cost",   "0.5,0.01"};
  const auto t_iter = [&](std::vector<std::string> extra, const char* strategy) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    const run_result r = s.run(a);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(strategy).at("t_iter").get<double>();
  };
  CHECK(t_iter({"--compression-on-compute-stream"}, "per_layer") == Approx(14.8));
  CHECK(t_iter({}, "per_layer") == Approx(14.8));
  // single group: backward ends at 8; compression 0.5 + 0.6 = 1.1; message 1 + 0.025 * 240 = 7
  CHECK(t_iter({}, "single") == Approx(16.1));
  // density 0.1: k = 6, 48 bytes: message 1 + 1.2 = 2.2
  CHECK(t_iter({"--density", "0.1"}, "single") == Approx(8 + 1.1 + 2.2));
  // after backward (ends at 8) messages take 0.5 + 0.0125 B: the single group's 240 B 3.5
  CHECK(t_iter({"--after-backward", "0.5,0.0125"}, "single") == Approx(8 + 1.1 + 3.5));
  // bucket cap 200 bytes: l3 (120 B) + l2 (80 B) reach it, l1 alone
  std::vector<std::string> a = base;
  a.insert(a.end(), {"--bucket-bytes", "200"});
  const run_result r = s.run(a);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("strategies").at("size_threshold").at("groups") ==
        nlohmann::json::parse(R"([["l3", "l2"], ["l1"]])"));
}

TEST_CASE("every shipped profile plans, and the timeline SVG is written", "[plan]") {
  const scratch s;
  for (const auto& [name, forward] :
       std::vector<std::pair<std::string, std::string>>{{"resnet20", "0.000325"},
                                                        {"resnet50", "0.2015"},
                                                        {"vgg16", "0.2519"},
                                                        {"vgg-style", "0.0447"},
                                                        {"fashion_mnist_cnn", "0.0054"}}) {
    INFO(name);
    const run_result r = s.run(args_for(shipped(name), forward, {"--density", "0.01"}));
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("optimal: t_iter") != std::string::npos);
  }
  const std::string svg = s.path("timeline.svg");
  const run_result r = s.run(args_for(shipped("resnet50"), "0.2015",
                                      {"--timeline-svg", svg, "--timeline-strategy", "mgwfbp"}));
  REQUIRE(r.status == 0);
  const std::string picture = read_bytes(svg);
  CHECK(picture.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(picture.find("communication") != std::string::npos);
  CHECK(picture.find("mgwfbp") != std::string::npos);
  CHECK(picture.find("fc.bias: backward") != std::string::npos);
  CHECK(picture.find("</svg>") != std::string::npos);
}

TEST_CASE("bad profiles exit with status 2 and one line", "[plan]") {
  const scratch s;
  const auto run_csv = [&](const std::string& text) {
    return s.run(args_for(s.write("bad.csv", text), "0"));
  };
  check_bad_input(s.run(args_for(s.path("missing.csv"), "0")), "cannot read profile");
  check_bad_input(s.run(args_for(s.path(""), "0")), "is a directory");
  check_bad_input(run_csv(""), "empty profile: no header line");
  check_bad_input(run_csv("name,numel,backward_seconds\n"),
                  "empty profile: the header is not followed by any layer");
  check_bad_input(run_csv("name,numel\nx,1\n"), "line 1: missing column 'backward_seconds'");
  check_bad_input(run_csv("name,numel,backward_seconds\nx,1\n"), "line 2: missing columns");
  check_bad_input(run_csv("name,numel,backward_seconds\nx,-1,0.1\n"), "numel '-1' is negative");
  check_bad_input(run_csv("name,numel,backward_seconds\nx,1,-0.1\n"),
                  "backward_seconds '-0.1' is negative");
  check_bad_input(run_csv("name,numel,backward_seconds\nx,1,abc\n"),
                  "backward_seconds 'abc' is not a finite decimal number");
  check_bad_input(run_csv("name,numel,backward_seconds\nx,1,1\nx,2,2\n"), "appears twice");
}

TEST_CASE("bad command lines exit with status 2 and one line", "[plan]") {
  const scratch s;
  const std::string csv = s.write("ok.csv", counterexample_csv);
  check_bad_input(s.run({"--profile", csv, "--forward-seconds", "0", "--beta", "1"}), "--alpha");
  check_bad_input(s.run(args_for(csv, "-1")), "--forward-seconds: -1 is negative");
  check_bad_input(s.run(args_for(csv, "fast")), "--forward-seconds: value 'fast' is not");
  check_bad_input(s.run(args_for(csv, "2e6")), "--forward-seconds: 2e6 is above the limit");
  check_bad_input(
      s.run({"--profile", csv, "--forward-seconds", "0", "--alpha", "-5e-5", "--beta", "1"}),
      "--alpha: -5e-5 is negative");
  check_bad_input(
      s.run({"--profile", csv, "--forward-seconds", "0", "--alpha", "1", "--beta", "inf"}),
      "--beta: value 'inf' is not a finite number");
  check_bad_input(s.run(args_for(csv, "0", {"--density", "0"})), "--density: 0 is outside (0, 1]");
  check_bad_input(s.run(args_for(csv, "0", {"--density", "1.5"})), "outside (0, 1]");
  check_bad_input(s.run(args_for(csv, "0", {"--compress-cost", "1"})),
                  "--compress-cost: '1' is not two numbers a,b");
  check_bad_input(s.run(args_for(csv, "0", {"--compress-cost", "1,x"})),
                  "--compress-cost: value 'x' is not a number");
  check_bad_input(s.run(args_for(csv, "0", {"--compress-cost", "-1,0"})),
                  "--compress-cost: -1 is negative");
  check_bad_input(s.run(args_for(csv, "0", {"--after-backward", "1"})),
                  "--after-backward: '1' is not two numbers a,b (seconds, seconds per byte)");
  check_bad_input(s.run(args_for(csv, "0", {"--after-backward", "0,-1"})),
                  "--after-backward: -1 is negative");
  check_bad_input(s.run(args_for(csv, "0", {"--bucket-bytes", "0"})),
                  "--bucket-bytes: 0 is below the minimum 1");
  check_bad_input(s.run(args_for(csv, "0", {"--bucket-bytes", "1.5"})),
                  "--bucket-bytes: value '1.5' is not an integer");
  check_bad_input(s.run(args_for(csv, "0", {"--timeline-strategy", "optimal"})),
                  "--timeline-strategy needs --timeline-svg");
  check_bad_input(
      s.run(args_for(csv, "0", {"--timeline-svg", s.path("t.svg"), "--timeline-strategy", "best"})),
      "unknown strategy 'best'");
  check_bad_input(s.run(args_for(csv, "0", {"--timeline-svg", s.path("")})), "is a directory");
  check_bad_input(s.run(args_for(csv, "0", {"--frobnicate"})), "frobnicate");
  CHECK_FALSE(fs::exists(s.path("t.svg")));
  // a model whose message time overflows is refused by the library's check, still status 2
  const std::string huge = s.write("huge.csv", "name,numel,backward_seconds\nw,1000000000000,1\n");
  check_bad_input(
      s.run({"--profile", huge, "--forward-seconds", "0", "--alpha", "0", "--beta", "1e300"}),
      "communication_seconds");
  const run_result help = s.run({"--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--compression-on-compute-stream") != std::string::npos);
}
