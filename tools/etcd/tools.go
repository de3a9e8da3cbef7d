//go:build tools

// Package tools names the main package scripts/control-plane.sh builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
