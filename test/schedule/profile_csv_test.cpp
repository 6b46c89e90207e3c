// SPDX-License-Identifier: Apache-2.0
// The profile CSV reader and writer: accepted forms, every documented rejection with its
// message, and the round trip writer -> reader.
#include <gradcomp/schedule/profile_csv.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/catch.hpp"

namespace schedule_profile_csv_test {

using namespace gradcomp::schedule;

namespace {

//! The message of the profile_csv_error that parsing `text` throws ("" if none is thrown).
std::string rejection(const std::string& text) {
  try {
    (void)parse_profile_csv(text, "p.csv");
  } catch (const profile_csv_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("profile CSV: accepted forms", "[schedule][csv]") {
  const std::vector<layer> layers = parse_profile_csv("# a comment\n"
                                                      "\n"
                                                      "name,numel,backward_seconds\r\n"
                                                      "conv1.weight,432,0.00012\r\n"
                                                      "  # indented comment\n"
                                                      " bn1.weight , 16 , 1.5e-5 \n"
                                                      "fc.bias,10,0\n"
                                                      "layer 4,7,3",
                                                      "p.csv");
  REQUIRE(layers.size() == 4);
  CHECK(layers[0].name == "conv1.weight");
  CHECK(layers[0].numel == 432);
  CHECK(layers[0].backward_seconds == 0.00012);
  CHECK(layers[1].name == "bn1.weight");
  CHECK(layers[1].numel == 16);
  CHECK(layers[1].backward_seconds == 1.5e-5);
  CHECK(layers[2].backward_seconds == 0.0);
  CHECK(layers[3].name == "layer 4"); // inner spaces are part of the name; no final newline
  std::istringstream in(" name , numel , backward_seconds\nx,1,1\n");
  CHECK(read_profile_csv(in, "stream").size() == 1);
}

TEST_CASE("profile CSV: rejections name the file, the line and the reason", "[schedule][csv]") {
  const std::string header = "name,numel,backward_seconds\n";
  CHECK(rejection("") == "profile 'p.csv': empty profile: no header line "
                         "'name,numel,backward_seconds'");
  CHECK(rejection("# only a comment\n\n") ==
        "profile 'p.csv': empty profile: no header line 'name,numel,backward_seconds'");
  CHECK(rejection(header) ==
        "profile 'p.csv': empty profile: the header is not followed by any layer");
  CHECK(rejection("name,numel\nx,1\n") ==
        "profile 'p.csv' line 1: missing column 'backward_seconds' in the header (expected "
        "'name,numel,backward_seconds')");
  CHECK(rejection("name,size,backward_seconds\n") ==
        "profile 'p.csv' line 1: header column 2 is 'size', expected 'numel' (the header must be "
        "'name,numel,backward_seconds')");
  CHECK(rejection("name,numel,backward_seconds,extra\n") ==
        "profile 'p.csv' line 1: the header has 4 columns, expected "
        "'name,numel,backward_seconds'");
  CHECK(rejection(header + "a,1\n") ==
        "profile 'p.csv' line 2: missing columns: 2 fields, expected 3 "
        "(name,numel,backward_seconds)");
  CHECK(rejection(header + "a,1,2,3\n") ==
        "profile 'p.csv' line 2: too many columns: 4 fields, expected 3 "
        "(name,numel,backward_seconds)");
  CHECK(rejection(header + "a,-5,0.1\n") == "profile 'p.csv' line 2: numel '-5' is negative");
  CHECK(rejection(header + "a,5,-0.1\n") ==
        "profile 'p.csv' line 2: backward_seconds '-0.1' is negative");
  CHECK(rejection(header + "a,5,-0\n") ==
        "profile 'p.csv' line 2: backward_seconds '-0' is negative");
  CHECK(rejection(header + "a,0,0.1\n") == "profile 'p.csv' line 2: numel 0 is outside [1, 2^40]");
  CHECK(rejection(header + "a,1099511627777,0.1\n") ==
        "profile 'p.csv' line 2: numel 1099511627777 is outside [1, 2^40]");
  CHECK(rejection(header + "a,99999999999999999999999,0.1\n") ==
        "profile 'p.csv' line 2: numel '99999999999999999999999' is out of range (at most 2^40)");
  CHECK(rejection(header + "a,1.5,0.1\n") ==
        "profile 'p.csv' line 2: numel '1.5' is not an integer (digits only)");
  CHECK(rejection(header + "a,,0.1\n") ==
        "profile 'p.csv' line 2: numel '' is not an integer (digits only)");
  CHECK(rejection(header + "a,+3,0.1\n") ==
        "profile 'p.csv' line 2: numel '+3' is not an integer (digits only)");
  CHECK(rejection(header + "a,3,fast\n") ==
        "profile 'p.csv' line 2: backward_seconds 'fast' is not a finite decimal number");
  CHECK(rejection(header + "a,3,inf\n") ==
        "profile 'p.csv' line 2: backward_seconds 'inf' is not a finite decimal number");
  CHECK(rejection(header + "a,3,nan\n") ==
        "profile 'p.csv' line 2: backward_seconds 'nan' is not a finite decimal number");
  CHECK(rejection(header + "a,3,1e999\n") ==
        "profile 'p.csv' line 2: backward_seconds '1e999' is not a finite decimal number");
  CHECK(rejection(header + "a,3,2e6\n") ==
        "profile 'p.csv' line 2: backward_seconds '2e6' is above the limit of 1e6 s");
  CHECK(rejection(header + ",3,1\n") == "profile 'p.csv' line 2: the layer name is empty");
  CHECK(rejection(header + "a\"b,3,1\n") ==
        "profile 'p.csv' line 2: the layer name contains the byte 0x22 (allowed: printable "
        "ASCII except ',' and '\"')");
  CHECK(rejection(header + "caf\xc3\xa9,3,1\n") ==
        "profile 'p.csv' line 2: the layer name contains the byte 0xc3 (allowed: printable "
        "ASCII except ',' and '\"')");
  CHECK(rejection(header + "a,3,1\nb,1,1\na,2,2\n") ==
        "profile 'p.csv' line 4: layer name 'a' appears twice (names must be unique)");
  CHECK(rejection(header + std::string(201, 'x') + ",1,1\n") ==
        "profile 'p.csv' line 2: the layer name is 201 characters long (at most 200)");
}

TEST_CASE("profile CSV: written profiles read back exactly", "[schedule][csv]") {
  const std::vector<layer> layers{{"conv1.weight", 9408, 0.004551},
                                  {"bn1.weight", 64, 0.0},
                                  {"odd value", 1, 0.1 + 0.2},
                                  {"tiny", 1099511627776, 5e-324},
                                  {"big", 3, 1e6}};
  const std::string text = to_profile_csv(layers);
  CHECK(text.rfind("name,numel,backward_seconds\nconv1.weight,9408,0.004551\n", 0) == 0);
  const std::vector<layer> back = parse_profile_csv(text, "written");
  REQUIRE(back.size() == layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    CHECK(back[i].name == layers[i].name);
    CHECK(back[i].numel == layers[i].numel);
    CHECK(back[i].backward_seconds == layers[i].backward_seconds);
  }
  CHECK_THROWS_AS(to_profile_csv(std::vector<layer>{}), std::invalid_argument);
  CHECK_THROWS_AS(to_profile_csv(std::vector<layer>{{"#x", 1, 0.0}}), std::invalid_argument);
  CHECK_THROWS_AS(to_profile_csv(std::vector<layer>{{"x", 1, -0.0}}), std::invalid_argument);
  CHECK_THROWS_AS(to_profile_csv(std::vector<layer>{{"x", 1, 0.0}, {"x", 2, 0.0}}),
                  std::invalid_argument);
}

} // namespace schedule_profile_csv_test
