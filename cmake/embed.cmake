# moeq_embed_files(OUTPUT f.cpp FUNCTION name BASE dir FILES ...)
# Generates f.cpp defining
#   const std::vector<moeq::EmbeddedFile>& moeq::name();
# with each file's path relative to BASE and its bytes. Regenerated when any file changes.
# NOTE: the script's path is taken where this file is included (CMAKE_CURRENT_LIST_DIR), so moeq builds as a
# subproject too (CMAKE_SOURCE_DIR is then the parent's tree).
set(MOEQ_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_run.cmake)
function(moeq_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;FUNCTION;BASE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DFUNCTION=${ARG_FUNCTION} -DBASE=${ARG_BASE}
            "-DFILES=${ARG_FILES}" -P ${MOEQ_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${MOEQ_EMBED_SCRIPT}
    COMMENT "Embedding ${ARG_FUNCTION}"
    VERBATIM)
endfunction()
