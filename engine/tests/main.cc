// The engine's unit tests (doctest): `engine_tests` runs them all, `engine_tests -tc="name"` one,
// `engine_tests -ltc` lists them.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
