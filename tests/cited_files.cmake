# cmake -P script: every document a source file or header cites (a path ending in .md) is in the repository, so no
# comment sends a reader to a file they do not have. ROOT: the repository.
file(GLOB_RECURSE sources RELATIVE "${ROOT}"
     "${ROOT}/include/*" "${ROOT}/core/*" "${ROOT}/comm/*" "${ROOT}/sim/*" "${ROOT}/cuda/*" "${ROOT}/config/*"
     "${ROOT}/grid/*" "${ROOT}/layers/*" "${ROOT}/device/*" "${ROOT}/reference/*" "${ROOT}/pipeline/*" "${ROOT}/model/*"
     "${ROOT}/checkpoint/*" "${ROOT}/plan/*" "${ROOT}/programs/*" "${ROOT}/sweep/*"
     "${ROOT}/bench/*.cpp" "${ROOT}/bench/*.hpp" "${ROOT}/apps/*.cpp" "${ROOT}/apps/*.hpp" "${ROOT}/examples/*.cpp"
     "${ROOT}/tests/*.cpp" "${ROOT}/tests/*.hpp"
     "${ROOT}/cmake/*" "${ROOT}/scripts/*")
set(cited 0)
foreach(source IN LISTS sources)
  file(STRINGS "${ROOT}/${source}" lines REGEX "[A-Za-z0-9_./-]+\\.md")
  foreach(line IN LISTS lines)
    string(REGEX MATCHALL "[A-Za-z0-9_./-]+\\.md" documents "${line}")
    foreach(document IN LISTS documents)
      math(EXPR cited "${cited} + 1")
      if(document MATCHES "(^|/)\\.\\./" OR NOT EXISTS "${ROOT}/${document}")
        message(FATAL_ERROR "${source} cites ${document}, which is not in the repository")
      endif()
    endforeach()
  endforeach()
endforeach()
if(cited EQUAL 0)
  message(FATAL_ERROR "no citation found: the scan is broken")
endif()
message(STATUS "${cited} citations, every one in the repository")
