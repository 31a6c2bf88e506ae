# Helpers that keep each area's CMakeLists short.
#
# ringtrain_area(NAME DIR DEPS...) builds src/DIR/*.cpp into the static library
# ringtrain_NAME. An area without sources yet is an INTERFACE library, so the tree
# configures while an area is still headers only.
function(ringtrain_area name dir)
  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${dir}/*.cpp")
  set(target ringtrain_${name})
  if(sources)
    add_library(${target} STATIC ${sources})
    target_include_directories(${target} PUBLIC "${PROJECT_SOURCE_DIR}/src")
    target_link_libraries(${target} PUBLIC ${ARGN})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE "${PROJECT_SOURCE_DIR}/src")
    target_link_libraries(${target} INTERFACE ${ARGN})
  endif()
endfunction()

# ringtrain_test(NAME SOURCES... LIBS...) : a serial Catch2 test executable, one ctest
# entry per executable.
function(ringtrain_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} ringtrain_catch_main)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
endfunction()

# ringtrain_mpi_test(NAME SOURCES... LIBS... NP 1 2 3 4) : a Catch2 test run under
# mpirun once per process count. The MPI Catch main reduces the pass flag over all
# ranks, so one rank's failure fails every rank; the timeout turns a hang into a failure.
function(ringtrain_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;NP" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} ringtrain_mpi_catch_main)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_NP)
    set(T_NP 1 2 3 4)
  endif()
  foreach(np IN LISTS T_NP)
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
                     --bind-to none -x OMP_NUM_THREADS=1 $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${np}
                         ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()
endfunction()
