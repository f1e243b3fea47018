from shrinkgpu.cli import main

main(prog_name="shrinkgpu")
