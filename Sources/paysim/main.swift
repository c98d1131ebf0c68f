print("paysim")
