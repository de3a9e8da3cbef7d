//go:build tools

// Package tools names the main package scripts/go-tool.sh builds: promtool, which
// tests/helm_chart.rs runs on the chart's PrometheusRule alerts (`promtool check rules`).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
