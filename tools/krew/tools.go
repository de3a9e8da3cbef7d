//go:build tools

// Package tools names the main package scripts/go-tool.sh builds: krew, which
// tests/krew_plugin.rs runs to install the kubectl plugin from its manifest.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
