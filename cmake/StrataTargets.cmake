# strata-libs: what `make` and `make install` build (the libraries, the PMPI
# libraries when an MPI compiler is found, the tools);
# strata-bench-programs: that and every target under bench/ (`make bench`).
# The tests are built only by the default target (`make test`).
function(strata_targets_below dir out)
  get_property(found DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    strata_targets_below(${sub} more)
    list(APPEND found ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

add_custom_target(strata-libs)
add_dependencies(strata-libs strata strata_static strata_override_object)
if(TARGET strata_secure)   # installed too: `make install` needs it built
  add_dependencies(strata-libs strata_secure)
endif()
if(TARGET strata_mpi)      # the PMPI library, for each MPI compiler found
  add_dependencies(strata-libs strata_mpi)
endif()
if(TARGET strata-trace)
  strata_targets_below(${CMAKE_SOURCE_DIR}/tools tool_targets)
  add_dependencies(strata-libs ${tool_targets})
endif()

add_custom_target(strata-bench-programs)
add_dependencies(strata-bench-programs strata-libs)
if(STRATA_BUILD_BENCH AND EXISTS ${CMAKE_SOURCE_DIR}/bench/CMakeLists.txt)
  strata_targets_below(${CMAKE_SOURCE_DIR}/bench bench_targets)
  if(bench_targets)
    add_dependencies(strata-bench-programs ${bench_targets})
  endif()
endif()
