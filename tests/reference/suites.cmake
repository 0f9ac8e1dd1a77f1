# reference's suites (included from tests/CMakeLists.txt, in its scope): the fp64 oracle against itself.
optimus_add_test(test_reference SOURCES reference/test_compare.cpp reference/test_gpt_gradients.cpp)
