# The library targets:
#   strata         build/libstrata.so   (overrides the malloc family)
#   strata_static  build/libstrata.a
#   build/strata.o one relocatable object with the whole library, for static override
# and strata_variant(NAME FLAGS...): a static library of the same sources built
# with extra compile/link flags (sanitizers) that exports only the strata_*
# names, so a sanitizer can keep owning malloc.
file(GLOB_RECURSE STRATA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.c)

# Link order, which is the order of the code in the library: what every
# program runs (the core, options, os, segmap, stats, init, the exit hooks)
# first, the large tier next, and what a malloc-only program never enters
# (arena, storage, transfer) last.  The kernel maps a file's pages in 64 KiB
# windows around each fault (fault-around), so code a program never runs
# costs it no memory only in windows apart from code it does run: in the
# glob's alphabetical order arena/ came first and storage/ between the rest,
# and all 164 KiB of text were resident in a program that called malloc once.
# A file matching no pattern goes last.
set(STRATA_LINK_ORDER core/ options/ os/os.c os/limits.c os/numa.c os/random.c os/run_delay.c
    os/thread_state.c os/thp.c segmap/ stats/ init/ storage/group.c large/)
set(STRATA_ORDERED_SOURCES)
foreach(pattern IN LISTS STRATA_LINK_ORDER)
  foreach(src IN LISTS STRATA_SOURCES)
    string(FIND "${src}" "${CMAKE_SOURCE_DIR}/src/${pattern}" at)
    if(at EQUAL 0)
      list(APPEND STRATA_ORDERED_SOURCES ${src})
    endif()
  endforeach()
  list(REMOVE_ITEM STRATA_SOURCES ${STRATA_ORDERED_SOURCES})
endforeach()
set(STRATA_SOURCES ${STRATA_ORDERED_SOURCES} ${STRATA_SOURCES})

set(STRATA_COMMON_FLAGS ${STRATA_WARNINGS} -fvisibility=hidden -fno-builtin-malloc
    -ftls-model=initial-exec -fno-plt -fno-semantic-interposition -ffunction-sections)

option(STRATA_DEBUG "Check internal invariants everywhere (strata_assert); slow" OFF)

# The C++ operators let std::bad_alloc unwind through them (src/init/cxx_operators.c).
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/init/cxx_operators.c PROPERTIES COMPILE_OPTIONS -fexceptions)

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

# Code layout (footprint).  The kernel maps a file's pages in 64 KiB
# windows around each page fault (fault-around), so a program has in memory
# every window of libstrata's text it ran one instruction of: all 164 KiB of
# it when the code a malloc-only program runs is spread among the storage,
# transfer and arena code.  Each function in its own section, the ones in
# cmake/hot-text.list (with the C library's stubs the library links, atexit
# and pthread_atfork, called at start) placed first in an output section of
# their own, and the text aligned to 64 KiB (the loader aligns a segment to
# its p_align, glibc >= 2.35), so those windows are always the same ones.
file(STRINGS ${CMAKE_SOURCE_DIR}/cmake/hot-text.list STRATA_HOT_FUNCTIONS REGEX "^[^#]")
set(hot_ld "/* Written by cmake/StrataLibrary.cmake from cmake/hot-text.list. */\nSECTIONS\n{\n  .text.strata_hot :\n  {\n    KEEP(*(SORT_NONE(.fini)))\n")
string(APPEND hot_ld "    *libc_nonshared.a:*(.text .text.*)\n    *crtbeginS.o(.text .text.*)\n")
string(APPEND hot_ld "    *(.text.startup .text.startup.*)\n    *(.text.exit .text.exit.*)\n")
foreach(fn IN LISTS STRATA_HOT_FUNCTIONS)
  string(APPEND hot_ld "    *(.text.${fn})\n")
endforeach()
string(APPEND hot_ld "  }\n}\nINSERT BEFORE .text;\n")
file(WRITE ${CMAKE_BINARY_DIR}/strata-hot.ld "${hot_ld}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/hot-text.list)
# Only where the linker takes the script (GNU ld and lld do; gold has no
# INSERT): elsewhere the library links as before (tests/layout skips).
include(CheckLinkerFlag)
check_linker_flag(C "-Wl,-T,${CMAKE_BINARY_DIR}/strata-hot.ld" STRATA_HOT_TEXT)
if(STRATA_HOT_TEXT)
  target_link_options(strata PRIVATE -Wl,-T,${CMAKE_BINARY_DIR}/strata-hot.ld -Wl,-z,max-page-size=0x10000)
  set_property(TARGET strata APPEND PROPERTY LINK_DEPENDS ${CMAKE_BINARY_DIR}/strata-hot.ld)
endif()

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
