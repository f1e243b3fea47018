val_spk = [12, 13, 14]
rank, world = 3, 4
my_val_spk = val_spk[rank::world]  # []
correct, total = 0, 40 * len(my_val_spk)
correct / total
