//go:build tools

// Package tools names the main package scripts/go-tool.sh builds: eksctl, which
// tests/advisor_eksctl.rs runs (`eksctl create cluster --dry-run`) on every cluster config
// the advisor emits.
package tools

import _ "github.com/weaveworks/eksctl/cmd/eksctl"
