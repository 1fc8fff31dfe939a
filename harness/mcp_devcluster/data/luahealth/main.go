// luahealth runs an Argo CD resource health script the way Argo CD does: in gopher-lua, with
// the object decoded from JSON into Lua tables as the global `obj`, and prints the returned
// health table as JSON. Tests use it to check manifests/argocd/*.lua against real objects.
//
//	luahealth SCRIPT.lua < object.json
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	lua "github.com/yuin/gopher-lua"
)

func toLua(state *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []interface{}:
		table := state.NewTable()
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]interface{}:
		table := state.NewTable()
		for key, item := range v {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	}
	return lua.LNil
}

func fromLua(value lua.LValue) interface{} {
	switch v := value.(type) {
	case *lua.LTable:
		out := map[string]interface{}{}
		v.ForEach(func(key, item lua.LValue) { out[key.String()] = fromLua(item) })
		return out
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return float64(v)
	case lua.LBool:
		return bool(v)
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: luahealth SCRIPT.lua < object.json")
		os.Exit(2)
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var object map[string]interface{}
	if err := json.Unmarshal(raw, &object); err != nil {
		fmt.Fprintln(os.Stderr, "object is not JSON:", err)
		os.Exit(2)
	}
	state := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer state.Close()
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoFile(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "script failed:", err)
		os.Exit(1)
	}
	result, _ := json.Marshal(fromLua(state.Get(-1)))
	fmt.Println(string(result))
}
