// SPDX-License-Identifier: Apache-2.0
// Fixture of "docs: a snippet that differs from its source fails": the code the doc quotes.
int answer() {
  return 42;
}
