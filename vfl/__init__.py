"""vfl: vertical federated learning with Paillier homomorphic encryption."""
