# Writes OUTPUT, the source file defining kBuildCommit (build_commit.h): COMMIT when given (an image built without the
# .git folder), else `git describe` of SOURCE_DIR, else "unknown". The file is rewritten only when
# the commit changed, so that a build of the same commit compiles nothing again.
set(commit "${COMMIT}")
if(commit STREQUAL "")
  execute_process(COMMAND git describe --always --dirty --abbrev=12 --exclude=*
    WORKING_DIRECTORY "${SOURCE_DIR}"
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE failed ERROR_QUIET)
  if(failed OR commit STREQUAL "")
    set(commit "unknown")
  endif()
endif()
set(content "#include \"build_commit.h\"\n\nconst char* const autotune::cli::kBuildCommit = \"${commit}\";\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
