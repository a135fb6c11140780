# composerTorch.cmake: after find_package(Torch), the libraries a target links to use LibTorch, with the CUDA runtime
# that LibTorch itself loads. Used by the build (CMakeLists.txt) and by the installed package (composerConfig.cmake).
#
# Torch's CMake config links the CUDA runtime and NVRTC of whatever CUDA toolkit it finds (here the toolkit's CUDA 13),
# while a CUDA build of LibTorch loads the runtime it was built with (the wheel's nvidia/cuda_runtime libcudart.so.12,
# or the libcudart-<hash>.so.12 a LibTorch zip carries in lib/). Linking both puts two CUDA runtimes in one process.
# Where LibTorch carries its own, torch::cudart is pointed at it and the toolkit's NVRTC is dropped (LibTorch finds its
# own NVRTC through libcaffe2_nvrtc; nothing of ours calls NVRTC).
#
# libcomposer calls c10_cuda and the CUDA runtime itself, and its installed copy has no run path to LibTorch: a program
# linking it must load both first, so they are linked --no-as-needed (as Torch's config links torch_cpu and
# torch_cuda), beside the plain paths that give the program its run path to them.
#
# Sets COMPOSER_TORCH_LIBRARIES (TORCH_LIBRARIES, corrected) and COMPOSER_TORCH_CUDART (the runtime chosen, or empty).
function(composer_find_torch_cuda_runtime)
  set(libs ${TORCH_LIBRARIES})
  set(cudart "")
  if(TARGET torch::cudart AND TORCH_INSTALL_PREFIX)
    file(GLOB candidates "${TORCH_INSTALL_PREFIX}/lib/libcudart*.so*"
         "${TORCH_INSTALL_PREFIX}/../nvidia/cuda_runtime/lib/libcudart.so.*")
    if(candidates)
      list(GET candidates 0 cudart)
      get_filename_component(cudart "${cudart}" REALPATH)
      set_property(TARGET torch::cudart PROPERTY INTERFACE_LINK_LIBRARIES
                   "${cudart}" "-Wl,--no-as-needed,\"${cudart}\" -Wl,--as-needed")
      if(CUDA_NVRTC_LIB)
        list(REMOVE_ITEM libs "${CUDA_NVRTC_LIB}")
      endif()
    endif()
  endif()
  if(C10_CUDA_LIBRARY)
    list(APPEND libs "-Wl,--no-as-needed,\"${C10_CUDA_LIBRARY}\" -Wl,--as-needed")
  endif()
  set(COMPOSER_TORCH_LIBRARIES ${libs} PARENT_SCOPE)
  set(COMPOSER_TORCH_CUDART "${cudart}" PARENT_SCOPE)
endfunction()
