# Helpers shared by every CMakeLists.txt of the project.

# Warnings as errors on our own targets only (third-party headers come from system
# include directories and generated code is included as SYSTEM).
function(kc_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
endfunction()

# Adds every direct sub-folder of the current source folder that has a CMakeLists.txt,
# in sorted order (dependencies between libcore targets are resolved by CMake at
# generate time, so the order does not matter for linking).
function(kc_add_subdirectories)
  file(GLOB children LIST_DIRECTORIES true RELATIVE "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/*")
  list(SORT children)
  foreach(child IN LISTS children)
    if(IS_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/${child}" AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt")
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()

# kc_add_test(<name> LABELS <area> [more labels] SOURCES <files> [LIBS <targets>])
# Builds one Catch2 executable with the project's shared catch main (benchmarking on)
# and registers every TEST_CASE with CTest under the given labels.
function(kc_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "kc_add_test(${name}): LABELS is required: one area label (alloc kube fabric devplugin sched reconfig demo sim vni rt bridge deploy, or for the layers api base net obs), plus unit (hermetic, in-process: the fast tier), real-peer, e2e or slow where they apply")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  kc_target_defaults(${name})
  target_link_libraries(${name} PRIVATE kc_catch_main ${ARG_LIBS})
  # -w NoTests: a CTest entry whose name Catch cannot match (a name holding ';' is split by
  # CMake, one starting with '-' is read as an option) fails instead of passing with no test run.
  catch_discover_tests(${name}
    TEST_PREFIX "${name}: "
    EXTRA_ARGS -w NoTests
    PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  # Labels are set by a CTest include file that runs after the discovered tests are defined:
  # passed through catch_discover_tests' PROPERTIES, a list of labels loses every label after
  # the first (its ';' does not survive the discovery command line).
  list(JOIN ARG_LABELS ";" labels)
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(DEFINED ${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${labels}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()
