# moeq_embed_files(OUTPUT f.cpp FUNCTION name BASE dir FILES ...)
# Generates f.cpp defining
#   const std::vector<moeq::EmbeddedFile>& moeq::name();
# with each file's path relative to BASE and its bytes. Regenerated when any file changes.
function(moeq_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;FUNCTION;BASE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DFUNCTION=${ARG_FUNCTION} -DBASE=${ARG_BASE}
            "-DFILES=${ARG_FILES}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    DEPENDS ${ARG_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    COMMENT "Embedding ${ARG_FUNCTION}"
    VERBATIM)
endfunction()
