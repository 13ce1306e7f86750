package collectors

// AgentGPU is the collector's view of the agent's client, for the tests
// outside the package (they import agent/gpusampler, which imports this
// package).
type AgentGPU = agentGPU

// SetGPUAgent makes the GPU collector c ask a instead of env.Agent: the
// client of agent/api lands on another branch; until then the tests speak
// the wire protocol with their own client.
func SetGPUAgent(c Collector, a AgentGPU) {
	c.(*gpuCollector).agentOf = func(*Env) agentGPU { return a }
}
