"""A real node: pods as containers under containerd and runc, run by a kubelet built from the
same Kubernetes release as the control plane, with images built here and never pulled.

Beside the process node (``mcp_devcluster.kubelet``), which runs a pod's command as a local
process and ignores its image, this node runs the image itself, so what only a container shows
(a non-root user, a read-only root filesystem, dropped capabilities, seccomp, cgroup limits and
the OOM killer, a service-account token mounted into the container) is real.

What each module does:

* ``debs``: the Debian packages (containerd, runc, the CNI plugins, docker.io to build images,
  mmdebstrap for the base image), installed once, quietly.
* ``images``: the base image (a Debian root filesystem from ``mmdebstrap``), the pause image
  (Kubernetes' own ``pause.c``), the operator image from the repository's ``Dockerfile`` and the
  reference server's, built by a Docker daemon of this harness and imported into containerd.
* ``runtime``: containerd's configuration and process, on sockets and directories of its own.
* ``node``: the node's address, its pod network (CNI bridge), the kubelet's configuration and
  process, and taking all of it down again, containers included.
"""
