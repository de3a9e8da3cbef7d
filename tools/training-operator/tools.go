//go:build tools

// Package tools names the main package scripts/go-tool.sh builds.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
