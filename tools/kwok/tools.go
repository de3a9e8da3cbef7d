//go:build tools

// Package tools names the main package scripts/control-plane.sh builds.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
