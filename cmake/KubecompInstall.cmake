# install(): each deployable daemon in its own component, so an image's build stage installs
# only its own binary (docker/<daemon>.Dockerfile: cmake --install ... --component <daemon>).
# A new daemon adds its target here and a Dockerfile; tests/deploy/docker_test.py checks both.
include(GNUInstallDirs)
foreach(daemon vni-webhook bridge-operator disaggpu-devplugin bridge-pod rt-kubelet-shim kubecomp-sched
               reconfig-mgr)
  install(TARGETS ${daemon} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${daemon})
endforeach()
