# The library targets:
#   strata         build/libstrata.so   (overrides the malloc family)
#   strata_static  build/libstrata.a
#   build/strata.o one relocatable object with the whole library, for static override
# and strata_variant(NAME FLAGS...): a static library of the same sources built
# with extra compile/link flags (sanitizers) that exports only the strata_*
# names, so a sanitizer can keep owning malloc.
file(GLOB_RECURSE STRATA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.c)

set(STRATA_COMMON_FLAGS ${STRATA_WARNINGS} -fvisibility=hidden -fno-builtin-malloc
    -ftls-model=initial-exec -fno-plt -fno-semantic-interposition)

option(STRATA_DEBUG "Check internal invariants everywhere (strata_assert); slow" OFF)

add_library(strata_obj OBJECT ${STRATA_SOURCES})
if(STRATA_DEBUG)
  target_compile_definitions(strata_obj PRIVATE STRATA_DEBUG=1)
endif()
target_include_directories(strata_obj PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_compile_options(strata_obj PRIVATE ${STRATA_COMMON_FLAGS})
set_target_properties(strata_obj PROPERTIES POSITION_INDEPENDENT_CODE ON)

find_package(Threads REQUIRED)

add_library(strata SHARED $<TARGET_OBJECTS:strata_obj>)
target_include_directories(strata PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                         $<INSTALL_INTERFACE:include>)
target_link_libraries(strata PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
target_link_options(strata PRIVATE -Wl,-Bsymbolic-functions -Wl,-z,now)
set_target_properties(strata PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0)

add_library(strata_static STATIC $<TARGET_OBJECTS:strata_obj>)
set_target_properties(strata_static PROPERTIES OUTPUT_NAME strata)
target_include_directories(strata_static PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:include>)
target_link_libraries(strata_static PUBLIC Threads::Threads ${CMAKE_DL_LIBS})

# One object for static override: linking it before libc makes its malloc win.
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/strata.o
  COMMAND ${CMAKE_LINKER} -r -o ${CMAKE_BINARY_DIR}/strata.o $<TARGET_OBJECTS:strata_obj>
  DEPENDS strata_obj $<TARGET_OBJECTS:strata_obj>
  COMMAND_EXPAND_LISTS
  COMMENT "Linking build/strata.o (static override object)")
add_custom_target(strata_override_object ALL DEPENDS ${CMAKE_BINARY_DIR}/strata.o)

# The hardened library, libstrata-secure.so (docs/security.md): the same
# sources with STRATA_SECURE — encoded links, guard pages, random order of
# fresh blocks, every check on every call.  Same API and exports.
add_library(strata_secure SHARED ${STRATA_SOURCES})
target_compile_definitions(strata_secure PRIVATE STRATA_SECURE=1)
target_include_directories(strata_secure PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:include>)
target_compile_options(strata_secure PRIVATE ${STRATA_COMMON_FLAGS})
target_link_libraries(strata_secure PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
target_link_options(strata_secure PRIVATE -Wl,-Bsymbolic-functions -Wl,-z,now)
set_target_properties(strata_secure PROPERTIES OUTPUT_NAME strata-secure VERSION ${PROJECT_VERSION} SOVERSION 0)

function(strata_variant name)
  add_library(${name} STATIC ${STRATA_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/include)
  target_compile_definitions(${name} PRIVATE STRATA_NO_OVERRIDE=1)
  target_compile_options(${name} PRIVATE ${STRATA_WARNINGS} -fno-builtin-malloc ${ARGN})
  target_link_options(${name} PUBLIC ${ARGN})
  target_link_libraries(${name} PUBLIC Threads::Threads)
endfunction()
