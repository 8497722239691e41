module mcp-exec-k8s-pause

go 1.22
