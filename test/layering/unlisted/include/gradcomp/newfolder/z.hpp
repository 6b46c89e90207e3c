// SPDX-License-Identifier: Apache-2.0
// A fake header for the layering check's negative test (scripts/check-layering.py --root
// test/layering/unlisted): newfolder/ is in no layer of docs/architecture.md, so the check must
// reject it until the folder is placed.
#pragma once
