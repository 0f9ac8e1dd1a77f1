# Interop suites (included from tests/CMakeLists.txt, in its scope).
# Interop against Python's safetensors and numpy (in a venv that scripts/test.sh creates in the build directory):
# interop/run_NAME_interop.sh runs the program NAME_interop (interop/NAME_interop.cpp) and the Python side in a work
# directory; without the venv the test is skipped (77).
function(optimus_add_interop_test name)
  add_executable(${name}_interop interop/${name}_interop.cpp)
  target_link_libraries(${name}_interop PRIVATE optimus::optimus)
  optimus_target_defaults(${name}_interop)
  add_test(NAME interop_${name}_python
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/interop/run_${name}_interop.sh $<TARGET_FILE:${name}_interop>
                   ${PROJECT_BINARY_DIR}/test-venv/bin/python ${CMAKE_CURRENT_BINARY_DIR}/interop_${name})
  set_tests_properties(interop_${name}_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endfunction()
# GPT-2: Optimus exports, Python reads and checks; Python writes, Optimus imports and checks.
optimus_add_interop_test(hf)
# Llama: Python writes a sharded Hugging Face Llama, Optimus imports it on a 2x2 grid; logits against numpy's forward
# of the published architecture, the sharded export read back.
optimus_add_interop_test(llama)
# BERT: Python writes a sharded Hugging Face BertForMaskedLM and a padded batch, Optimus imports it on a 2x2 grid; the
# masked-LM loss against numpy's forward of the published architecture, the sharded export read back.
optimus_add_interop_test(bert)
