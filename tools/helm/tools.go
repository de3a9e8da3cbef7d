//go:build tools

// Package tools names the main package scripts/helm.sh builds: helm, which the chart's
// tests (tests/helm_chart.rs) run for lint, template, install, upgrade and uninstall.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
