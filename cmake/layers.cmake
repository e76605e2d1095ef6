# One static library per layer folder (src/<layer>/*.cc), so each layer builds
# and tests on its own and the dependency graph between layers stays visible.
function(mx_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cc)
  if(srcs)
    add_library(mx_${name} STATIC ${srcs})
    target_include_directories(mx_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(mx_${name} PUBLIC ${L_DEPS})
  else()
    add_library(mx_${name} INTERFACE)
    target_include_directories(mx_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(mx_${name} INTERFACE ${L_DEPS})
  endif()
endfunction()

# One GoogleTest binary per layer: tests/unit/<layer>/*.cc -> test_<layer>.
function(mx_layer_tests name)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cc)
  if(srcs)
    add_executable(test_${name} ${srcs})
    target_link_libraries(test_${name} PRIVATE ${ARGN} GTest::gtest GTest::gtest_main)
    target_compile_definitions(test_${name} PRIVATE
      MX_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      MX_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared"
      MX_BINARY="$<TARGET_FILE:mxserve>")
    gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
