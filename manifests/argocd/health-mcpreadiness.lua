-- Argo CD health of an MCPReadiness: Healthy only when the Ready condition is True for the
-- current generation; Degraded with the operator's reason when it is False; Progressing while
-- the checks run or the spec changed since the last verdict.
local hs = { status = "Progressing", message = "waiting for the first verdict" }
if obj.spec ~= nil and obj.spec.suspend == true then
  return { status = "Suspended", message = "suspended" }
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.observedGeneration ~= nil and condition.observedGeneration < obj.metadata.generation then
      hs.message = "evaluating generation " .. obj.metadata.generation
      return hs
    end
    local verdict = obj.status.verdict or "none"
    if condition.status == "True" then
      return { status = "Healthy", message = "verdict " .. verdict .. ": " .. (condition.message or "") }
    end
    if condition.status == "False" then
      return { status = "Degraded", message = (condition.reason or "NotReady") .. ": " .. (condition.message or "") }
    end
    hs.message = condition.message or "checks are running"
    return hs
  end
end
return hs
