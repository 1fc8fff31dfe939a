module mcp-operator.local/luahealth

go 1.26.0

require github.com/yuin/gopher-lua v1.1.2
