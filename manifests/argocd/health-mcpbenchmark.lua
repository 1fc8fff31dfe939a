-- Argo CD health of an MCPBenchmark: Progressing while shards run, Suspended when suspended,
-- Healthy when the merged results meet the SLOs, Degraded with the reason otherwise.
local hs = { status = "Progressing", message = "waiting for the shard Job" }
if obj.status == nil then
  return hs
end
if obj.status.phase == "Suspended" then
  return { status = "Suspended", message = "benchmark Job suspended" }
end
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" and condition.status == "True" then
      return { status = "Healthy", message = condition.message or "" }
    end
    if condition.type == "Ready" and condition.status == "False" then
      return { status = "Degraded", message = (condition.reason or "NotReady") .. ": " .. (condition.message or "") }
    end
  end
end
if obj.status.shards ~= nil then
  hs.message = "shards: " .. (obj.status.shards.succeeded or 0) .. " of " .. (obj.status.shards.expected or 0) .. " done"
end
return hs
