//go:build tools

// Package tools names the main package scripts/go-tool.sh builds: actionlint, which
// tests/release_workflow.rs runs on .github/workflows.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
