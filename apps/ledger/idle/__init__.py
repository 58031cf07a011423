"""Who pays for the pools' idle capacity: the policy and reserved shares (models), and the one
computation that shares each pool-hour's idle out by them (allocation)."""
