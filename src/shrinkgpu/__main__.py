from shrinkgpu.cli import main

main()
