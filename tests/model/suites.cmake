# model's suites (included from tests/CMakeLists.txt, in its scope): BERT's masked-LM inputs.
optimus_add_test(test_masked_lm SOURCES model/test_masked_lm.cpp)
