// SPDX-License-Identifier: Apache-2.0
// gradcomp-cost: evaluates the alpha-beta-gamma cost models of include/gradcomp/cost/ for a
// batch of queries, so that scripts (scripts/plot-transport-benchmarks.py) take their model
// numbers from the C++ functions themselves instead of re-deriving the formulas. Reads a JSON
// array of queries (from the file argument, or stdin without one or with "-"), each naming a
// model, e.g. {"model": "ring_allreduce", "bytes": 67108864, "ranks": 4, "alpha_seconds": 1e-4,
// "beta_seconds_per_byte": 8e-9}, and prints the same array with "seconds" added to every query.
// Model "NAME" is gradcomp::cost::NAME_seconds; the fields are that function's parameters and
// the gradcomp::cost::network fields. MPI-free. Usage: docs/transport-benchmarks.md.
#include <gradcomp/cost/alpha_beta.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../common/tool_support.hpp"

namespace {

namespace fs = std::filesystem;
namespace gc = gradcomp::cost;
using json = nlohmann::ordered_json;

constexpr std::string_view program_name = "gradcomp-cost";
using gradcomp_tools::cat; // concatenates the streamable arguments into one string
using gradcomp_tools::usage_error;

constexpr double max_bytes = 1e18;           //!< limit of every byte count (an exabyte).
constexpr double max_seconds = 1e6;          //!< limit of alpha (seconds per message).
constexpr double max_seconds_per_byte = 1.0; //!< limit of beta and gamma.
constexpr std::int64_t max_ranks = 1 << 24;  //!< limit of ranks, workers, servers and group.

// ---- one query's fields --------------------------------------------------------------------

//! Reads the fields of query `index`, remembering which were read so that the others (typos)
//! can be reported.
class fields {
public:
  fields(const json& query, std::size_t index) : query_(query), index_(index) {}

  //! A finite number in [0, limit]. @throws usage_error if missing (without a default), not a
  //! number, negative or above the limit.
  double number(std::string_view name, double limit, std::optional<double> fallback = {}) {
    const json* v = find(name, fallback.has_value(), "a number >= 0");
    if (v == nullptr) {
      return *fallback;
    }
    if (!v->is_number()) {
      throw error(name, cat(v->dump(), " is not a number"));
    }
    const double x = v->get<double>();
    if (!std::isfinite(x)) {
      throw error(name, cat(v->dump(), " is not a finite number"));
    }
    if (x < 0.0 || std::signbit(x)) {
      throw error(name, cat(v->dump(), " is negative"));
    }
    if (x > limit) {
      throw error(name, cat(v->dump(), " is above the limit ", limit));
    }
    return x;
  }

  //! An integer in [1, max_ranks]. @throws usage_error if missing, not an integer or outside.
  int count(std::string_view name) {
    const json* v = find(name, false, "an integer >= 1");
    if (!v->is_number_integer()) {
      throw error(name, cat(v->dump(), " is not an integer"));
    }
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t{max_ranks}) {
      throw error(name, cat(v->dump(), " is above the limit ", max_ranks));
    }
    const auto n = v->get<std::int64_t>();
    if (n < 1) {
      throw error(name, cat(n, " is below the minimum 1"));
    }
    if (n > max_ranks) {
      throw error(name, cat(n, " is above the limit ", max_ranks));
    }
    return static_cast<int>(n);
  }

  //! One of `names` (index i of the matching name), or `fallback` when the field is absent.
  std::size_t choice(std::string_view name,
                     std::initializer_list<std::string_view> names,
                     std::size_t fallback) {
    std::string list;
    for (const std::string_view n : names) {
      list += cat(list.empty() ? "" : ", ", '"', n, '"');
    }
    const json* v = find(name, true, list);
    if (v == nullptr) {
      return fallback;
    }
    if (v->is_string()) {
      std::size_t i = 0;
      for (const std::string_view n : names) {
        if (v->get<std::string>() == n) {
          return i;
        }
        ++i;
      }
    }
    throw error(name, cat(v->dump(), " is not one of ", list));
  }

  //! The alpha, beta and gamma fields of `prefix` ("" or "intra." for a nested object).
  gc::network network(const json& object, std::string_view prefix) {
    const json* saved = std::exchange(object_, &object);
    const std::string saved_prefix = std::exchange(prefix_, std::string(prefix));
    gc::network net;
    net.alpha_seconds = number("alpha_seconds", max_seconds);
    net.beta_seconds_per_byte = number("beta_seconds_per_byte", max_seconds_per_byte);
    net.gamma_seconds_per_byte = number("gamma_seconds_per_byte", max_seconds_per_byte, 0.0);
    if (!prefix_.empty()) {
      check_unknown(); // a nested object is complete here; the query is checked at its end
    }
    object_ = saved;
    prefix_ = saved_prefix;
    return net;
  }

  //! The network of the query itself.
  gc::network network() { return network(query_, ""); }

  //! An optional nested network object `name` (e.g. "intra"); empty when absent.
  std::optional<gc::network> nested_network(std::string_view name) {
    const json* v = find(name, true, "an object with alpha_seconds, beta_seconds_per_byte");
    if (v == nullptr) {
      return std::nullopt;
    }
    if (!v->is_object()) {
      throw error(name, cat(v->dump(), " is not an object"));
    }
    return network(*v, cat(name, '.'));
  }

  //! @throws usage_error naming the first field of the current object that was not read.
  void check_unknown() const {
    for (const auto& [key, value] : object_->items()) {
      if (!read_.contains(prefix_ + key)) {
        throw usage_error(cat("query ", index_, ": unknown field '", prefix_, key, "'",
                              model_ ? cat(" for model \"", *model_, '"') : std::string()));
      }
    }
  }

  //! Marks `name` as read without a check (fields the caller handles itself).
  void accept(std::string_view name) { read_.insert(prefix_ + std::string(name)); }

  //! The model name, for the messages.
  void set_model(std::string_view model) { model_ = std::string(model); }

  //! A usage_error "query I, field 'NAME': WHAT".
  [[nodiscard]] usage_error error(std::string_view name, std::string_view what) const {
    return usage_error(cat("query ", index_, ", field '", prefix_, name, "'",
                           model_ ? cat(" (model \"", *model_, "\")") : std::string(), ": ", what));
  }

private:
  //! The field `name` of the current object; nullptr when absent and `optional`.
  const json* find(std::string_view name, bool optional, std::string_view expected) {
    read_.insert(prefix_ + std::string(name));
    const auto it = object_->find(std::string(name));
    if (it == object_->end()) {
      if (optional) {
        return nullptr;
      }
      throw error(name, cat("missing (expected ", expected, ")"));
    }
    return &*it;
  }

  const json& query_;
  const json* object_ = &query_;
  std::string prefix_;
  std::size_t index_;
  std::optional<std::string> model_;
  std::set<std::string> read_;
};

// ---- the models ----------------------------------------------------------------------------

//! A model: its name (gradcomp::cost::NAME_seconds) and how to evaluate it from the fields.
struct model {
  std::string_view name;
  std::function<double(fields&)> evaluate;
};

const std::vector<model>& models() {
  static const std::vector<model> all = {
      {"ring_allreduce",
       [](fields& f) {
         const double bytes = f.number("bytes", max_bytes);
         const int ranks = f.count("ranks");
         return gc::ring_allreduce_seconds(bytes, ranks, f.network());
       }},
      {"allgather",
       [](fields& f) {
         const double bytes = f.number("bytes_per_rank", max_bytes);
         const int ranks = f.count("ranks");
         return gc::allgather_seconds(bytes, ranks, f.network());
       }},
      {"reduce_scatter",
       [](fields& f) {
         const double bytes = f.number("bytes", max_bytes);
         const int ranks = f.count("ranks");
         return gc::reduce_scatter_seconds(bytes, ranks, f.network());
       }},
      {"all_to_all",
       [](fields& f) {
         const double bytes = f.number("bytes_per_peer", max_bytes);
         const int ranks = f.count("ranks");
         return gc::all_to_all_seconds(bytes, ranks, f.network());
       }},
      {"sparse_allgather",
       [](fields& f) {
         const double k = f.number("k", max_bytes);
         const double per_pair = f.number("bytes_per_pair", max_bytes);
         const int ranks = f.count("ranks");
         return gc::sparse_allgather_seconds(k, per_pair, ranks, f.network());
       }},
      {"parameter_server",
       [](fields& f) {
         const double push = f.number("push_bytes", max_bytes);
         const double pull = f.number("pull_bytes", max_bytes);
         const int workers = f.count("workers");
         const int servers = f.count("servers");
         const auto placement = f.choice("placement", {"colocated", "dedicated"}, 0) == 0
                                    ? gc::server_placement::colocated
                                    : gc::server_placement::dedicated;
         return gc::parameter_server_seconds(push, pull, workers, servers, f.network(), placement);
       }},
      {"hierarchical_allreduce",
       [](fields& f) {
         const double bytes = f.number("bytes", max_bytes);
         const int ranks = f.count("ranks");
         const int group = f.count("group");
         const auto variant = f.choice("variant", {"leader", "reduce_scatter"}, 0) == 0
                                  ? gc::hierarchical_variant::leader
                                  : gc::hierarchical_variant::reduce_scatter;
         const gc::network inter = f.network();
         const gc::network intra = f.nested_network("intra").value_or(inter);
         const double piece = f.number("piece_bytes", max_bytes, 0.0); // 0: one piece
         return gc::hierarchical_allreduce_seconds(bytes, ranks, group, intra, inter, variant,
                                                   false, piece);
       }},
  };
  return all;
}

std::string model_list() {
  std::string list;
  for (const model& m : models()) {
    list += cat(list.empty() ? "" : ", ", m.name);
  }
  return list;
}

//! The seconds of query `index`. @throws usage_error for a bad query (the library's own
//! argument checks included).
double evaluate(const json& query, std::size_t index) {
  if (!query.is_object()) {
    throw usage_error(cat("query ", index, ": ", query.dump(), " is not an object"));
  }
  fields f(query, index);
  f.accept("id"); // free for the caller: passed through
  const auto it = query.find("model");
  if (it == query.end()) {
    throw f.error("model", cat("missing (expected one of ", model_list(), ")"));
  }
  f.accept("model");
  for (const model& m : models()) {
    if (it->is_string() && it->get<std::string>() == m.name) {
      f.set_model(m.name);
      double seconds = 0.0;
      try {
        seconds = m.evaluate(f);
      } catch (const std::invalid_argument& e) { // gradcomp::detail::require
        throw usage_error(cat("query ", index, " (model \"", m.name, "\"): ", e.what()));
      }
      f.check_unknown();
      return seconds;
    }
  }
  throw f.error("model", cat(it->dump(), " is not a model (expected one of ", model_list(), ")"));
}

// ---- input and output ----------------------------------------------------------------------

json read_queries(const std::string& path) {
  const bool from_stdin = path.empty() || path == "-";
  const std::string source = from_stdin ? std::string("stdin") : cat('\'', path, '\'');
  std::ifstream file;
  if (!from_stdin) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status)) {
      throw usage_error(cat("cannot read queries ", source, ": ",
                            ec ? ec.message() : std::string("no such file")));
    }
    if (fs::is_directory(status)) {
      throw usage_error(cat("queries ", source, " is a directory, not a JSON file"));
    }
    file.open(path, std::ios::binary);
    if (!file) {
      throw usage_error(cat("cannot open queries ", source, " for reading"));
    }
  }
  std::istream& in = from_stdin ? std::cin : file;
  json queries;
  try {
    queries = json::parse(in);
  } catch (const json::parse_error& e) {
    throw usage_error(cat("queries ", source, " are not valid JSON: ", e.what()));
  }
  if (!queries.is_array()) {
    throw usage_error(
        cat("queries ", source, ": expected a JSON array of queries, got ", queries.type_name()));
  }
  return queries;
}

int run(const std::string& path, int indent) {
  json queries = read_queries(path);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    queries[i]["seconds"] = evaluate(queries[i], i); // all checked before anything is printed
  }
  std::cout << queries.dump(indent) << '\n';
  std::cout.flush();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app("Evaluates gradcomp's alpha-beta-gamma cost models (gradcomp::cost::NAME_seconds) "
               "for a JSON array of queries and prints the array with \"seconds\" added to each.",
               std::string(program_name));
  std::string path;
  int indent = -1;
  app.add_option("queries", path,
                 "JSON file: an array of queries {\"model\": NAME, arguments...}; '-' or none: "
                 "stdin")
      ->type_name("FILE");
  app.add_option("--indent", indent, "Pretty-print the output with N spaces (default: one line)")
      ->type_name("N")
      ->check(CLI::Range(0, 16));
  app.footer(
      "Models and their fields (every model also takes the network: alpha_seconds, "
      "beta_seconds_per_byte, gamma_seconds_per_byte (default 0)):\n"
      "  ring_allreduce: bytes, ranks\n"
      "  allgather: bytes_per_rank, ranks\n"
      "  reduce_scatter: bytes, ranks\n"
      "  all_to_all: bytes_per_peer, ranks\n"
      "  sparse_allgather: k, bytes_per_pair, ranks\n"
      "  parameter_server: push_bytes, pull_bytes, workers, servers, placement (\"colocated\" "
      "(default) or \"dedicated\")\n"
      "  hierarchical_allreduce: bytes, ranks, group, variant (\"leader\" (default) or "
      "\"reduce_scatter\"), intra (optional network inside a group; default: the same), "
      "piece_bytes (the transport's pipelined pieces; default 0: one piece)\n"
      "A query may carry an \"id\" (any JSON value), passed through. Exit status: 0 on success, 2 "
      "for a bad command line or query (one line on stderr naming the query index and field; "
      "nothing printed on stdout).");
  return gradcomp_tools::tool_main<CLI::ParseError>(program_name, app, argc, argv,
                                                    [&] { return run(path, indent); });
}
