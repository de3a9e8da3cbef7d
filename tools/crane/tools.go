//go:build tools

// Package tools names the main package scripts/go-tool.sh builds: crane, which
// scripts/image.sh assembles the container image with (no Docker daemon).
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
