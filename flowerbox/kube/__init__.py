"""flowerbox on Kubernetes: the box as Pod security, a run as a Job (flowerbox.kube.render),
applied through the official client (flowerbox.kube.cluster)."""
